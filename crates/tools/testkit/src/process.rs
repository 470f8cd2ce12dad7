//! `livestate serve` as a child process: what the binary's tests start, kill with `SIGKILL` and
//! stop with a signal, one way for all of them.

use std::ffi::OsStr;
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// How `livestate serve` is to be started ([`ServeCommand::new`]); [`ServeCommand::spawn`]
/// starts it.
#[derive(Debug)]
pub struct ServeCommand {
    cmd: Command,
    listen: String,
    log: Option<PathBuf>,
}

impl ServeCommand {
    /// `BIN serve --dir DIR --listen 127.0.0.1:<a free port>`, its standard output and error
    /// discarded.
    pub fn new(bin: &Path, dir: &Path) -> ServeCommand {
        ServeCommand::listening(bin, dir, &format!("127.0.0.1:{}", crate::free_port()))
    }

    /// As [`ServeCommand::new`], on `listen` (a restart on the address a killed server had).
    pub fn listening(bin: &Path, dir: &Path, listen: &str) -> ServeCommand {
        let mut cmd = Command::new(bin);
        cmd.args(["serve", "--listen", listen, "--dir"]).arg(dir).stdout(Stdio::null()).stderr(Stdio::null());
        ServeCommand { cmd, listen: listen.to_string(), log: None }
    }

    /// Sets an environment variable of the server.
    #[must_use]
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> ServeCommand {
        self.cmd.env(key, value);
        self
    }

    /// Sets environment variables of the server.
    #[must_use]
    pub fn envs<K: AsRef<OsStr>, V: AsRef<OsStr>>(
        mut self,
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> ServeCommand {
        self.cmd.envs(vars);
        self
    }

    /// Appends the server's standard error to `log` ([`ServeChild::log_tail`] shows its end).
    ///
    /// # Panics
    /// When `log` cannot be opened for appending.
    #[must_use]
    pub fn log_to(mut self, log: &Path) -> ServeCommand {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap_or_else(|e| panic!("open the server log {}: {e}", log.display()));
        self.cmd.stderr(file);
        self.log = Some(log.to_path_buf());
        self
    }

    /// Keeps the server's standard error for [`ServeChild::stop`] to return.
    #[must_use]
    pub fn capture_stderr(mut self) -> ServeCommand {
        self.cmd.stderr(Stdio::piped());
        self
    }

    /// Starts the server without waiting for it ([`ServeChild::wait_listening`] waits).
    ///
    /// # Panics
    /// When the binary cannot be started.
    pub fn spawn(mut self) -> ServeChild {
        let child = self.cmd.spawn().unwrap_or_else(|e| panic!("start {:?}: {e}", self.cmd.get_program()));
        ServeChild { child: Some(child), listen: self.listen, log: self.log }
    }

    /// Starts the server and waits until it accepts connections ([`ServeChild::wait_listening`]).
    pub fn start(self) -> ServeChild {
        let mut child = self.spawn();
        child.wait_listening(Duration::from_secs(60));
        child
    }
}

/// A running `livestate serve`, killed and reaped when dropped (a failed test leaves no server
/// behind).
#[derive(Debug)]
pub struct ServeChild {
    /// `None` once [`ServeChild::stop`] has taken it.
    child: Option<std::process::Child>,
    listen: String,
    log: Option<PathBuf>,
}

impl ServeChild {
    fn child(&mut self) -> &mut std::process::Child {
        self.child.as_mut().expect("the server was stopped")
    }

    /// The address it listens on, `127.0.0.1:PORT`.
    pub fn listen(&self) -> &str {
        &self.listen
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.listen)
    }

    /// The process id.
    pub fn id(&self) -> u32 {
        self.child.as_ref().expect("the server was stopped").id()
    }

    /// Waits until the server's port accepts connections.
    ///
    /// # Panics
    /// When the server exits first, or `within` passes; the message has the end of its log.
    pub fn wait_listening(&mut self, within: Duration) {
        let started = Instant::now();
        while std::net::TcpStream::connect(&self.listen).is_err() {
            self.assert_running("starting");
            assert!(
                started.elapsed() < within,
                "serve did not listen on {} within {within:?}{}",
                self.listen,
                self.tail()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Panics, naming `while_doing` and the end of its log, if the server has exited.
    ///
    /// # Panics
    /// As above.
    pub fn assert_running(&mut self, while_doing: &str) {
        if let Some(status) = self.child().try_wait().expect("poll the server") {
            panic!("serve exited with {status} while {while_doing}{}", self.tail());
        }
    }

    /// `SIGKILL`, and waits for the process to be gone.
    ///
    /// # Panics
    /// When the signal cannot be sent.
    pub fn kill_9(&mut self) {
        let child = self.child();
        child.kill().expect("kill the server");
        child.wait().expect("reap the server");
    }

    /// Sends `signal` (`"TERM"`, `"INT"`) as a service manager or a terminal would, and waits for
    /// the server to exit: its status and, after [`ServeCommand::capture_stderr`], its standard
    /// error.
    ///
    /// # Panics
    /// When the signal cannot be sent.
    pub fn stop(mut self, signal: &str) -> Output {
        let pid = self.id().to_string();
        let sent = Command::new("kill").args([&format!("-{signal}"), &pid]).status().expect("run kill");
        assert!(sent.success(), "kill -{signal} {pid} failed");
        let child = self.child.take().expect("the server was stopped");
        child.wait_with_output().expect("wait for the server")
    }

    /// The exit status, if the server has exited.
    ///
    /// # Panics
    /// When the process cannot be polled.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child().try_wait().expect("poll the server")
    }

    /// The last `lines` lines of the server's log ([`ServeCommand::log_to`]); empty without one.
    pub fn log_tail(&self, lines: usize) -> String {
        self.log.as_deref().map_or_else(String::new, |log| last_lines(log, lines))
    }

    fn tail(&self) -> String {
        match self.log {
            Some(_) => format!(":\n{}", self.log_tail(40)),
            None => String::new(),
        }
    }
}

/// The last `lines` lines of the text file `path` (empty when it cannot be read): the end of a
/// server's log.
pub fn last_lines(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let tail: Vec<&str> = text.lines().rev().take(lines).collect();
    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
}

impl Drop for ServeChild {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
