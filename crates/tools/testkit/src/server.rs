//! `livestate serve` in the test's own process, on a loopback port (feature `server`): a data
//! directory initialised from a spec, a token per principal, and a server that stops when asked
//! (or when the test's runtime ends).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use livestate_server::{ServeConfig, ServerError};
use tokio::task::JoinHandle;

/// How long [`InProcessServer::serve`] waits for the server to accept connections, and
/// [`InProcessServer::stop`] for it to finish.
const PATIENCE: Duration = Duration::from_secs(60);

/// A data directory served in this process.
pub struct InProcessServer {
    addr: SocketAddr,
    dir: PathBuf,
    tokens: HashMap<String, String>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    handle: Option<JoinHandle<Result<(), ServerError>>>,
    _tmp: tempfile::TempDir,
}

impl InProcessServer {
    /// Initialises a directory from the spec `write_spec` writes into the directory it is
    /// given, issues a token to each of `principals` (name, scopes), and serves it with
    /// `config`.
    ///
    /// # Panics
    /// When any step fails: a test cannot go on without its server.
    pub async fn start(
        write_spec: impl FnOnce(&Path) -> PathBuf,
        principals: &[(&str, &[&str])],
        config: ServeConfig,
    ) -> InProcessServer {
        let tmp = tempfile::tempdir().expect("a temporary directory");
        let dir = tmp.path().join("d");
        let spec = write_spec(tmp.path());
        drop(livestate_engine::Livestate::init(&dir, &spec).await.expect("initialise the directory"));
        let mut server = InProcessServer {
            addr: ([127, 0, 0, 1], 0).into(),
            dir,
            tokens: HashMap::new(),
            stop: None,
            handle: None,
            _tmp: tmp,
        };
        for (name, scopes) in principals {
            server.add_principal(name, scopes);
        }
        server.serve(config).await;
        server
    }

    /// Issues a token to `name` with `scopes` (a server running reads it at once).
    ///
    /// # Panics
    /// When the principal is refused.
    pub fn add_principal(&mut self, name: &str, scopes: &[&str]) -> &str {
        let scopes: Vec<String> = scopes.iter().map(|s| s.to_string()).collect();
        let token = livestate_server::auth::add_principal(&self.principals_file(), name, &scopes)
            .unwrap_or_else(|e| panic!("add principal {name}: {e}"));
        self.tokens.insert(name.to_string(), token);
        &self.tokens[name]
    }

    /// Serves the directory (again, after [`InProcessServer::stop`]) with `config`, on a new
    /// port, once it accepts connections.
    ///
    /// # Panics
    /// When no port can be bound, or the server does not accept connections within a minute.
    pub async fn serve(&mut self, config: ServeConfig) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind a loopback port");
        self.addr = listener.local_addr().expect("the listener's address");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let served = self.dir.clone();
        self.handle = Some(tokio::spawn(async move {
            livestate_server::serve_with(&served, listener, config, async {
                let _ = stopped.await;
            })
            .await
        }));
        self.stop = Some(stop);
        let deadline = Instant::now() + PATIENCE;
        while tokio::net::TcpStream::connect(self.addr).await.is_err() {
            assert!(Instant::now() < deadline, "the server did not accept connections within {PATIENCE:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops the server gracefully (its directory stays until the server is dropped).
    ///
    /// # Panics
    /// When the server fails or takes over a minute to stop.
    pub async fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(h) = self.handle.take() {
            tokio::time::timeout(PATIENCE, h)
                .await
                .expect("the server stops when asked")
                .expect("the server's task does not panic")
                .expect("the server stops without an error");
        }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://` and where it listens.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The directory's principals file.
    pub fn principals_file(&self) -> PathBuf {
        self.dir.join("principals.toml")
    }

    /// Every principal with its token.
    pub fn tokens(&self) -> impl Iterator<Item = (&str, &str)> {
        self.tokens.iter().map(|(p, t)| (p.as_str(), t.as_str()))
    }

    /// The token issued to `principal`.
    ///
    /// # Panics
    /// When none was.
    pub fn token(&self, principal: &str) -> &str {
        self.tokens.get(principal).unwrap_or_else(|| panic!("no token was issued to {principal}"))
    }
}
