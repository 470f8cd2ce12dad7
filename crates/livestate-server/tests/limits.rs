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
    let token = &server.tokens["module:inventory"];
    for announced in ["5000000", "1025"] {
        let head = format!(
            "POST /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Type: application/x-ndjson\r\nContent-Length: {announced}\r\n\r\n"
        );
        let (status, headers, body) = raw(server.addr, &head).await;
        assert_eq!(status, 413, "{headers}{body}");
        assert!(headers.contains("content-type: application/json"), "{headers}");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert!(v["error"].as_str().unwrap().contains(&format!("{announced} bytes")), "{v}");
    }
    // Nothing was recorded.
    let health = server.client("agent:procurement").health().await.unwrap();
    assert_eq!(health["record_next_offset"], serde_json::json!(0), "{health}");
    server.stop().await;
}

#[tokio::test]
async fn a_chunked_body_over_the_limit_and_a_wrong_method_answer_json_errors() {
    let config = livestate_server::ServeConfig { max_body_bytes: 1024, ..Default::default() };
    let mut server = start_with(config).await;
    let token = server.tokens["module:inventory"].clone();
    // No length announced: the body is cut off at the limit while it is read.
    let chunk = "x".repeat(2048);
    let head = format!(
        "POST /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{chunk}\r\n0\r\n\r\n",
        chunk.len()
    );
    let (status, headers, body) = raw(server.addr, &head).await;
    assert_eq!(status, 413, "{headers}{body}");
    assert!(headers.contains("content-type: application/json"), "{headers}");
    assert!(serde_json::from_str::<Value>(&body).unwrap()["error"].is_string(), "{body}");

    // A method the route does not take: 405, JSON, and the methods it does take.
    let head = format!("DELETE /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n");
    let (status, headers, body) = raw(server.addr, &head).await;
    assert_eq!(status, 405, "{headers}{body}");
    assert!(headers.contains("content-type: application/json"), "{headers}");
    assert!(headers.contains("allow: post"), "{headers}");
    assert!(serde_json::from_str::<Value>(&body).unwrap()["error"].is_string(), "{body}");
    server.stop().await;
}
