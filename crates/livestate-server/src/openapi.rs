//! The OpenAPI document of the HTTP API, generated from the handlers' annotations.

use axum::Json;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

#[derive(OpenApi)]
#[openapi(
    info(title = "livestate", description = "The company's live state for domain agents: reads with receipts, consistent reads, trigger firings, proposals, decisions, outboxes and audits."),
    paths(
        crate::health,
        crate::whoami,
        crate::principals,
        crate::post_events,
        crate::reads::tables,
        crate::reads::rows,
        crate::reads::consistent,
        crate::reads::schema,
        crate::reads::sql,
        crate::reads::firings,
        crate::reads::stream,
        crate::reads::metrics,
        crate::proposals::create,
        crate::proposals::list,
        crate::proposals::get,
        crate::proposals::decide,
        crate::proposals::outbox,
        crate::proposals::audit,
    ),
    components(schemas(
        crate::reads::ConsistentRead,
        crate::reads::TableRead,
        crate::reads::SqlRequest,
        crate::proposals::NewProposal,
        crate::proposals::Source,
        crate::proposals::Rule,
        crate::proposals::Risk,
        crate::proposals::NewDecision,
        crate::store::ProposalEntry,
        crate::store::Decision,
        crate::store::OutboxItem,
    )),
    modifiers(&BearerToken)
)]
pub(crate) struct ApiDoc;

struct BearerToken;

impl Modify for BearerToken {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "token",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// `GET /v1/openapi.json` (no token needed).
pub(crate) async fn document() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}
