//! Principals, roles and tokens.
//!
//! Who may call the API is written in the directory's principals file (`D/principals.toml`,
//! format in `docs/formats/principals.md`): one entry per principal with the SHA-256 hash of
//! its token, never the token itself. The server re-reads the file whenever it changes, so a
//! token added or revoked with `livestate token` takes effect on the next request.
//!
//! A principal's role comes from its name:
//!
//! | name | may |
//! |---|---|
//! | `module:<m>` | emit events of module `m`; pull `m`'s outbox |
//! | `agent:<a>` | read state, subscribe to triggers, create proposals (as `a`) |
//! | `person:<p>` | read state and proposals; decide proposals for the modules in its `scopes` |
//! | `admin` or `admin:<x>` | read, emit any module's events, pull any outbox, manage |
//!
//! Nobody may emit `decisions.*` events: the server writes those from proposals and decisions.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The module whose events only the server writes.
pub const DECISIONS_MODULE: &str = "decisions";

/// Why the principals file could not be used or changed.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("principals file {path}: {message}")]
    File { path: PathBuf, message: String },
    #[error("principal name `{name}`: {message}")]
    BadName { name: String, message: String },
    #[error("principal `{name}` already exists (revoke it first to issue a new token)")]
    Exists { name: String },
    #[error("no principal `{name}` (known: {known})")]
    Unknown { name: String, known: String },
}

impl AuthError {
    /// Whose failure this is: a principals file that cannot be read or parsed is the server's,
    /// a bad name or a name already taken or unknown is the caller's.
    pub fn kind(&self) -> livestate_api::ErrorKind {
        use livestate_api::ErrorKind;
        match self {
            AuthError::File { .. } => ErrorKind::Internal,
            AuthError::BadName { .. } => ErrorKind::Input,
            AuthError::Exists { .. } => ErrorKind::Conflict,
            AuthError::Unknown { .. } => ErrorKind::NotFound,
        }
    }
}

/// What a principal is, from its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    Module(String),
    Agent(String),
    Person { name: String, scopes: Vec<String> },
    Admin,
}

/// One thing the API lets a caller do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Permission {
    /// Read state tables, receipts, proposals and audits.
    Read,
    /// Append events of this module.
    Emit(String),
    /// Read trigger firings.
    Subscribe,
    /// Create proposals.
    Propose,
    /// Decide proposals carried out by this module.
    Decide(String),
    /// Pull this module's outbox.
    Outbox(String),
    /// Administer the server (principals, metrics of everything).
    Manage,
}

impl std::fmt::Display for Permission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Permission::Read => f.write_str("read"),
            Permission::Emit(m) => write!(f, "emit:{m}"),
            Permission::Subscribe => f.write_str("subscribe"),
            Permission::Propose => f.write_str("propose"),
            Permission::Decide(m) => write!(f, "decide:{m}"),
            Permission::Outbox(m) => write!(f, "outbox:{m}"),
            Permission::Manage => f.write_str("manage"),
        }
    }
}

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub name: String,
    pub role: Role,
}

impl Principal {
    /// Whether the principal holds `p`.
    pub fn may(&self, p: &Permission) -> bool {
        match (&self.role, p) {
            (_, Permission::Emit(m)) if m == DECISIONS_MODULE => false,
            (Role::Admin, Permission::Propose | Permission::Decide(_)) => false,
            (Role::Admin, _) => true,
            (Role::Module(own), Permission::Emit(m) | Permission::Outbox(m)) => own == m,
            (Role::Agent(_), Permission::Read | Permission::Subscribe | Permission::Propose) => true,
            (Role::Person { .. }, Permission::Read) => true,
            (Role::Person { scopes, .. }, Permission::Decide(m)) => scopes.iter().any(|s| s == "*" || s == m),
            _ => false,
        }
    }

    /// The agent's own name (`procurement` for `agent:procurement`).
    pub fn agent_name(&self) -> Option<&str> {
        match &self.role {
            Role::Agent(a) => Some(a),
            _ => None,
        }
    }
}

/// Parses a principal name into its role.
///
/// # Errors
/// [`AuthError::BadName`] for an unknown kind or a malformed name.
pub fn role_of(name: &str, scopes: &[String]) -> Result<Role, AuthError> {
    let bad = |message: &str| AuthError::BadName { name: name.into(), message: message.into() };
    if name == "admin" {
        return Ok(Role::Admin);
    }
    let Some((kind, rest)) = name.split_once(':') else {
        return Err(bad("expected `module:<name>`, `agent:<name>`, `person:<name>` or `admin`"));
    };
    let valid = !rest.is_empty()
        && rest.len() <= 64
        && rest.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if !valid {
        return Err(bad("the part after `:` must be 1-64 letters, digits, `_`, `-` or `.`"));
    }
    if !scopes.is_empty() && kind != "person" {
        return Err(bad("only a person has scopes"));
    }
    match kind {
        "module" if rest == DECISIONS_MODULE => {
            Err(bad("`decisions` is the server's own module; no principal may act as it"))
        }
        "module" => Ok(Role::Module(rest.into())),
        "agent" => Ok(Role::Agent(rest.into())),
        "person" => Ok(Role::Person { name: rest.into(), scopes: scopes.to_vec() }),
        "admin" => Ok(Role::Admin),
        _ => Err(bad("expected `module:<name>`, `agent:<name>`, `person:<name>` or `admin`")),
    }
}

/// One entry of the principals file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrincipalEntry {
    pub name: String,
    /// Lower-case hex SHA-256 of the token.
    pub token_sha256: String,
    /// Persons only: the modules whose proposals they may decide (`*` for every module).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PrincipalsFile {
    #[serde(default)]
    principals: Vec<PrincipalEntry>,
}

/// Lower-case hex SHA-256 of `token`.
pub fn hash_token(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

/// Lower-case hex of `bytes`. Every request hashes its token, so this writes digits from a table
/// (a `format!` per byte was a third of authenticating).
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(2 * bytes.len());
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

/// A new random token: `lst_` and 192 random bits in hex.
///
/// # Panics
/// When the operating system has no randomness to give.
pub fn new_token() -> String {
    let mut bytes = [0u8; 24];
    getrandom::fill(&mut bytes).expect("the operating system provides randomness");
    format!("lst_{}", hex(&bytes))
}

fn load_entries(path: &Path) -> Result<Vec<PrincipalEntry>, AuthError> {
    let bad = |message: String| AuthError::File { path: path.into(), message };
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(bad(e.to_string())),
    };
    let file: PrincipalsFile = toml::from_str(&text).map_err(|e| bad(e.to_string()))?;
    let mut seen = std::collections::HashSet::new();
    for p in &file.principals {
        role_of(&p.name, &p.scopes).map_err(|e| bad(e.to_string()))?;
        if p.token_sha256.len() != 64 || !p.token_sha256.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(bad(format!("principal `{}`: token_sha256 is not a SHA-256 in hex", p.name)));
        }
        if !seen.insert(&p.name) {
            return Err(bad(format!("principal `{}` appears twice", p.name)));
        }
    }
    Ok(file.principals)
}

fn store_entries(path: &Path, entries: &[PrincipalEntry]) -> Result<(), AuthError> {
    let bad = |message: String| AuthError::File { path: path.into(), message };
    let body = toml::to_string_pretty(&PrincipalsFile { principals: entries.to_vec() })
        .map_err(|e| bad(e.to_string()))?;
    let text = format!(
        "# Who may call the livestate API. Tokens are stored as SHA-256 hashes only.\n\
         # Manage with `livestate token add|revoke|list`; a running server picks changes up.\n\n{body}"
    );
    let tmp = path.with_extension("toml.tmp");
    std::fs::write(&tmp, text).map_err(|e| bad(e.to_string()))?;
    std::fs::rename(&tmp, path).map_err(|e| bad(e.to_string()))
}

/// Adds principal `name` with a fresh token; returns the token (shown once, stored hashed).
///
/// # Errors
/// A bad name, an existing principal, or the file cannot be read or written.
pub fn add_principal(path: &Path, name: &str, scopes: &[String]) -> Result<String, AuthError> {
    role_of(name, scopes)?;
    if name.starts_with("person:") && scopes.is_empty() {
        return Err(AuthError::BadName {
            name: name.into(),
            message: "a person needs at least one scope (a module name, or `*`)".into(),
        });
    }
    let mut entries = load_entries(path)?;
    if entries.iter().any(|e| e.name == name) {
        return Err(AuthError::Exists { name: name.into() });
    }
    let token = new_token();
    entries.push(PrincipalEntry {
        name: name.into(),
        token_sha256: hash_token(&token),
        scopes: scopes.to_vec(),
        created_at: Some(chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
    });
    store_entries(path, &entries)?;
    Ok(token)
}

/// Removes principal `name`: its token stops working at once, also on a running server.
///
/// # Errors
/// An unknown principal, or the file cannot be read or written.
pub fn revoke_principal(path: &Path, name: &str) -> Result<(), AuthError> {
    let mut entries = load_entries(path)?;
    let before = entries.len();
    entries.retain(|e| e.name != name);
    if entries.len() == before {
        return Err(AuthError::Unknown {
            name: name.into(),
            known: entries.iter().map(|e| e.name.as_str()).collect::<Vec<_>>().join(", "),
        });
    }
    store_entries(path, &entries)
}

/// The principals in the file (hashes included, tokens never).
///
/// # Errors
/// The file cannot be read or is malformed.
pub fn list_principals(path: &Path) -> Result<Vec<PrincipalEntry>, AuthError> {
    load_entries(path)
}

/// The principals file as the server sees it, re-read whenever it changes on disk.
pub struct Principals {
    path: PathBuf,
    cached: Mutex<Cached>,
}

#[derive(Default)]
struct Cached {
    stamp: Option<(SystemTime, u64)>,
    entries: Vec<(String, Principal)>,
    error: Option<String>,
}

/// Why a request could not be authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unauthenticated {
    Missing,
    Unknown,
    /// The principals file is broken: nobody is let in until it is fixed.
    Broken(String),
}

impl Principals {
    pub fn new(path: PathBuf) -> Principals {
        Principals { path, cached: Mutex::new(Cached::default()) }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The principal holding `token`.
    ///
    /// # Errors
    /// [`Unauthenticated`] saying why not.
    pub fn authenticate(&self, token: Option<&str>) -> Result<Principal, Unauthenticated> {
        let token = token.map(str::trim).filter(|t| !t.is_empty()).ok_or(Unauthenticated::Missing)?;
        let hash = hash_token(token);
        let mut c = self.cached.lock().expect("principals lock");
        let stamp = std::fs::metadata(&self.path)
            .ok()
            .map(|m| (m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len() ^ file_id(&m)));
        if stamp != c.stamp || c.stamp.is_none() {
            match load_entries(&self.path) {
                Ok(entries) => {
                    c.entries = entries
                        .into_iter()
                        .map(|e| {
                            let role = role_of(&e.name, &e.scopes).expect("checked when loaded");
                            (e.token_sha256.to_ascii_lowercase(), Principal { name: e.name, role })
                        })
                        .collect();
                    c.error = None;
                }
                Err(e) => {
                    tracing::error!(error = %e, "principals file unusable; refusing every token");
                    c.entries.clear();
                    c.error = Some(e.to_string());
                }
            }
            c.stamp = stamp;
        }
        if let Some(e) = &c.error {
            return Err(Unauthenticated::Broken(e.clone()));
        }
        // Compare every entry in full so timing says nothing about which hash was close.
        let mut found = None;
        for (h, p) in &c.entries {
            if constant_time_eq(h.as_bytes(), hash.as_bytes()) {
                found = Some(p.clone());
            }
        }
        found.ok_or(Unauthenticated::Unknown)
    }

    /// Every principal's name and role, for administrators.
    pub fn names(&self) -> Vec<PrincipalEntry> {
        load_entries(&self.path).unwrap_or_default()
    }
}

#[cfg(unix)]
fn file_id(m: &std::fs::Metadata) -> u64 {
    std::os::unix::fs::MetadataExt::ino(m)
}

#[cfg(not(unix))]
fn file_id(_: &std::fs::Metadata) -> u64 {
    0
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The answers to a caller the API does not let through.
impl crate::error::ApiError {
    /// 403 naming the permission `who` lacks.
    pub fn forbidden(who: &Principal, missing: &Permission) -> crate::error::ApiError {
        crate::error::ApiError::new(
            livestate_api::ErrorCode::Forbidden,
            format!("{} may not do this: it lacks permission `{missing}`", who.name),
        )
    }

    /// 401 saying why the request's token was not accepted.
    pub fn unauthenticated(why: &Unauthenticated) -> crate::error::ApiError {
        let message = match why {
            Unauthenticated::Missing => "no token: send `Authorization: Bearer <token>`".to_string(),
            Unauthenticated::Unknown => "the token is not valid (unknown or revoked)".to_string(),
            Unauthenticated::Broken(e) => {
                format!("no token is accepted until the principals file is fixed: {e}")
            }
        };
        crate::error::ApiError::new(livestate_api::ErrorCode::Unauthenticated, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_hashes_are_lower_case_sha256_hex_as_stored_principals_files_hold_them() {
        // The SHA-256 test vector of FIPS 180-2: a principals file written by any earlier
        // version keeps matching its tokens.
        assert_eq!(hash_token("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        let token = new_token();
        assert!(token.starts_with("lst_") && token.len() == 4 + 48, "{token}");
        assert!(token[4..].bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)), "{token}");
    }

    #[test]
    fn roles_hold_exactly_their_permissions() {
        let p = |name: &str, scopes: &[&str]| {
            let scopes: Vec<String> = scopes.iter().map(|s| s.to_string()).collect();
            Principal { name: name.into(), role: role_of(name, &scopes).unwrap() }
        };
        let inv = p("module:inventory", &[]);
        assert!(inv.may(&Permission::Emit("inventory".into())));
        assert!(!inv.may(&Permission::Emit("commerce".into())));
        assert!(!inv.may(&Permission::Read));
        let agent = p("agent:procurement", &[]);
        assert!(agent.may(&Permission::Propose) && agent.may(&Permission::Read));
        assert!(!agent.may(&Permission::Decide("procurement".into())));
        assert!(!agent.may(&Permission::Emit("procurement".into())));
        let buyer = p("person:ana", &["procurement"]);
        assert!(buyer.may(&Permission::Decide("procurement".into())));
        assert!(!buyer.may(&Permission::Decide("operations".into())));
        assert!(!buyer.may(&Permission::Propose));
        let admin = p("admin", &[]);
        assert!(admin.may(&Permission::Manage) && admin.may(&Permission::Emit("inventory".into())));
        assert!(!admin.may(&Permission::Emit(DECISIONS_MODULE.into())));
        assert!(!admin.may(&Permission::Decide("procurement".into())));
        assert!(role_of("module:decisions", &[]).is_err());
        assert!(role_of("robot:x", &[]).is_err());
        assert!(role_of("agent:../x", &[]).is_err());
    }

    #[test]
    fn a_revoked_token_stops_working_without_a_restart() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("principals.toml");
        let token = add_principal(&path, "agent:procurement", &[]).unwrap();
        let principals = Principals::new(path.clone());
        assert_eq!(principals.authenticate(Some(&token)).unwrap().name, "agent:procurement");
        assert_eq!(principals.authenticate(Some("lst_nope")), Err(Unauthenticated::Unknown));
        assert_eq!(principals.authenticate(None), Err(Unauthenticated::Missing));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains(&token), "the token itself is never stored");
        revoke_principal(&path, "agent:procurement").unwrap();
        assert_eq!(principals.authenticate(Some(&token)), Err(Unauthenticated::Unknown));
        assert!(matches!(add_principal(&path, "person:ana", &[]), Err(AuthError::BadName { .. })));
    }
}

/// Recent failed authentications (a token that is not valid) per client address: past
/// [`Failures::LIMIT`] in [`Failures::WINDOW`], the address gets 429 for any token until the
/// window has passed, so tokens cannot be guessed at network speed. Requests without a token
/// do not count (they guess nothing).
#[derive(Debug, Default)]
pub(crate) struct Failures {
    by_address: Mutex<HashMap<IpAddr, VecDeque<Instant>>>,
}

impl Failures {
    pub const LIMIT: usize = 30;
    pub const WINDOW: Duration = Duration::from_secs(60);

    /// Whether `ip` has used up its failed attempts; forgets attempts older than the window.
    pub fn blocked(&self, ip: IpAddr) -> bool {
        let mut map = self.by_address.lock().expect("no holder panics");
        let now = Instant::now();
        let Some(times) = map.get_mut(&ip) else { return false };
        while times.front().is_some_and(|t| now.duration_since(*t) >= Self::WINDOW) {
            times.pop_front();
        }
        if times.is_empty() {
            map.remove(&ip);
            return false;
        }
        times.len() >= Self::LIMIT
    }

    /// Counts a failed attempt from `ip`.
    pub fn record(&self, ip: IpAddr) {
        let mut map = self.by_address.lock().expect("no holder panics");
        let now = Instant::now();
        // Addresses whose attempts have all aged out are dropped, so the map stays small.
        map.retain(|_, times| times.back().is_some_and(|t| now.duration_since(*t) < Self::WINDOW));
        let times = map.entry(ip).or_default();
        times.push_back(now);
        if times.len() > Self::LIMIT {
            times.pop_front();
        }
    }
}
