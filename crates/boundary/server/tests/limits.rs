//! Request bodies over the limit are refused before they are read, and every error the HTTP
//! layers answer themselves (413, 405) is the API's JSON error.

mod common;

use std::time::Duration;

use common::start_with;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Sends `head` (and nothing more) and reads the answer: status line, headers, body.
async fn raw(addr: std::net::SocketAddr, head: &str) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    // The answer must come without the body ever being sent; the server closes after it.
    let read = async {
        loop {
            let n = s.read(&mut buf).await.unwrap_or(0);
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&got);
            if let Some((_, body)) = text.split_once("\r\n\r\n") {
                if body.trim_end().ends_with('}') {
                    break;
                }
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(5), read).await.expect("answered within 5 s, body unsent");
    let text = String::from_utf8_lossy(&got).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").expect("a complete answer");
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, head.to_ascii_lowercase(), body.to_string())
}

#[tokio::test]
async fn a_body_announced_over_the_limit_is_refused_at_once_with_json() {
    let config = livestate_server::ServeConfig { max_body_bytes: 1024, ..Default::default() };
    let mut server = start_with(config).await;
    let token = server.token("module:inventory");
    for announced in ["5000000", "1025"] {
        let head = format!(
            "POST /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Type: application/x-ndjson\r\nContent-Length: {announced}\r\n\r\n"
        );
        let (status, headers, body) = raw(server.addr(), &head).await;
        assert_eq!(status, 413, "{headers}{body}");
        assert!(headers.contains("content-type: application/json"), "{headers}");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert!(v["message"].as_str().unwrap().contains(&format!("{announced} bytes")), "{v}");
    }
    // Nothing was recorded.
    let health = server.client("agent:procurement").health().await.unwrap();
    assert_eq!(health.record_next_offset, 0, "{health:?}");
    server.stop().await;
}

#[tokio::test]
async fn a_chunked_body_over_the_limit_is_cut_off_with_a_413_in_json() {
    let config = livestate_server::ServeConfig { max_body_bytes: 1024, ..Default::default() };
    let mut server = start_with(config).await;
    let token = server.token("module:inventory").to_string();
    // No length announced: the body is cut off at the limit while it is read.
    let chunk = "x".repeat(2048);
    let head = format!(
        "POST /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{chunk}\r\n0\r\n\r\n",
        chunk.len()
    );
    let (status, headers, body) = raw(server.addr(), &head).await;
    assert_eq!(status, 413, "{headers}{body}");
    assert!(headers.contains("content-type: application/json"), "{headers}");
    assert!(serde_json::from_str::<Value>(&body).unwrap()["message"].is_string(), "{body}");
    server.stop().await;
}

#[tokio::test]
async fn a_method_the_route_does_not_take_gets_a_405_in_json_naming_the_allowed_ones() {
    let mut server = start_with(livestate_server::ServeConfig::default()).await;
    let token = server.token("module:inventory").to_string();
    let head = format!("DELETE /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n");
    let (status, headers, body) = raw(server.addr(), &head).await;
    assert_eq!(status, 405, "{headers}{body}");
    assert!(headers.contains("content-type: application/json"), "{headers}");
    assert!(headers.contains("allow: post"), "{headers}");
    assert!(serde_json::from_str::<Value>(&body).unwrap()["message"].is_string(), "{body}");
    server.stop().await;
}

/// A server whose connection limits are short enough to watch.
async fn impatient(max_connections: usize) -> common::TestServer {
    let connections = livestate_server::listen::ConnectionLimits {
        header_timeout: Duration::from_millis(500),
        body_timeout: Duration::from_millis(700),
        max_connections,
        drain_timeout: Duration::from_secs(10),
    };
    start_with(livestate_server::ServeConfig { connections, ..Default::default() }).await
}

/// Sends `bytes` and then nothing; returns what the server wrote before it closed the
/// connection, and how long that took. Fails if it is still open after `patience`.
async fn until_closed(addr: std::net::SocketAddr, bytes: &[u8], patience: Duration) -> (String, Duration) {
    let started = std::time::Instant::now();
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(bytes).await.unwrap();
    let mut got = Vec::new();
    let read = async {
        let mut buf = [0u8; 4096];
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(patience, read).await.expect("the server closed the connection");
    (String::from_utf8_lossy(&got).into_owned(), started.elapsed())
}

#[tokio::test]
async fn silent_half_sent_and_idle_connections_are_closed_at_the_header_timeout() {
    let mut server = impatient(64).await;
    let patience = Duration::from_secs(5);
    // Says nothing at all.
    let (said, took) = until_closed(server.addr(), b"", patience).await;
    assert!(said.is_empty() && took >= Duration::from_millis(400), "{said:?} after {took:?}");
    // Half a request head.
    let (said, _) =
        until_closed(server.addr(), b"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Slow: ", patience).await;
    assert!(!said.contains("200 OK"), "{said}");
    // A whole request, answered; then the kept-alive connection idles and is closed.
    let (said, took) =
        until_closed(server.addr(), b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n", patience).await;
    assert!(said.starts_with("HTTP/1.1 200"), "{said}");
    assert!(took >= Duration::from_millis(400), "closed only once idle: {took:?}");
    server.stop().await;
}

#[tokio::test]
async fn a_body_that_does_not_arrive_in_time_gets_408_and_a_close() {
    let mut server = impatient(64).await;
    let token = server.token("module:inventory").to_string();
    let short = format!(
        "POST /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Type: application/x-ndjson\r\nContent-Length: 100\r\n\r\n{{\"id\":"
    );
    let endless = format!(
        "POST /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{{\"id\"\r\n"
    );
    for head in [short, endless] {
        let (said, took) = until_closed(server.addr(), head.as_bytes(), Duration::from_secs(5)).await;
        assert!(said.starts_with("HTTP/1.1 408"), "{said}");
        assert!(said.to_ascii_lowercase().contains("content-type: application/json"), "{said}");
        assert!(said.contains("did not arrive within"), "{said}");
        assert!(took < Duration::from_secs(3), "{took:?}");
    }
    let health = server.client("agent:procurement").health().await.unwrap();
    assert_eq!(health.record_next_offset, 0, "nothing recorded: {health:?}");
    server.stop().await;
}

#[tokio::test]
async fn connections_beyond_the_cap_wait_for_one_to_close_and_are_then_served() {
    let mut server = impatient(3).await;
    // Three silent connections take every slot until their header timeout closes them.
    let mut holders = Vec::new();
    for _ in 0..3 {
        holders.push(TcpStream::connect(server.addr()).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = std::time::Instant::now();
    let (said, _) = until_closed(
        server.addr(),
        b"GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        Duration::from_secs(10),
    )
    .await;
    assert!(said.starts_with("HTTP/1.1 200"), "{said}");
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "served only once a slot was free: {:?}",
        started.elapsed()
    );
    drop(holders);
    server.stop().await;
}
