//! Who calls: the caller's own name and role (`GET /v1/whoami`) and, for administrators, every
//! principal (`GET /v1/principals`).

use serde::{Deserialize, Serialize};

/// What a principal may do, by kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Role {
    /// A module: emits its own events and reads its outbox.
    Module {
        /// The module's name.
        module: String,
    },
    /// An agent: reads, subscribes to triggers and proposes.
    Agent {
        /// The agent's name.
        agent: String,
    },
    /// A person: reads and decides the proposals of the modules in scope.
    Person {
        /// The person's name.
        person: String,
        /// The modules whose proposals the person may decide (`*` for every module).
        scopes: Vec<String>,
    },
    /// An administrator: manages principals.
    Admin,
}

/// The answer of `GET /v1/whoami`: the caller's name and role.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WhoAmI {
    /// The principal's name (`agent:procurement`).
    pub name: String,
    /// What the principal may do.
    pub role: Role,
}

/// One principal, as administrators see it (never its token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Principal {
    /// The principal's name (`person:ana`).
    pub name: String,
    /// Persons only: the modules whose proposals they may decide (`*` for every module).
    pub scopes: Vec<String>,
    /// When the principal was created (UTC), when known.
    pub created_at: Option<String>,
}

/// The answer of `GET /v1/principals`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Principals {
    /// Every principal.
    pub principals: Vec<Principal>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_role_is_tagged_by_its_kind() {
        let text = r#"{"name":"person:ana","role":{"kind":"person","person":"person:ana","scopes":["*"]}}"#;
        let me: WhoAmI = serde_json::from_str(text).expect("parses");
        assert_eq!(serde_json::to_string(&me).expect("serializes"), text);
        let admin = serde_json::to_string(&Role::Admin).expect("serializes");
        assert_eq!(admin, r#"{"kind":"admin"}"#);
    }
}
