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
        crate::reads::quarantine,
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
        crate::sheet::sheet,
        crate::sheet::kinds,
        crate::history::history,
    ),
    components(schemas(
        livestate_api::read::ConsistentRead,
        livestate_api::read::TableRead,
        crate::reads::SqlRequest,
        livestate_api::read::SqlAnswer,
        crate::proposals::NewProposal,
        crate::proposals::Source,
        crate::proposals::Rule,
        crate::proposals::Risk,
        crate::proposals::NewDecision,
        crate::store::ProposalEntry,
        crate::proposals::ProposalList,
        crate::store::Decision,
        crate::store::OutboxItem,
        livestate_api::proposal::Proposed,
        livestate_api::proposal::PinnedTag,
        livestate_api::proposal::Decided,
        livestate_api::proposal::ProposalDoc,
        livestate_api::proposal::ProposalDocument,
        livestate_api::proposal::Audit,
        livestate_api::proposal::Evidence,
        livestate_api::proposal::CausedEvent,
        livestate_api::proposal::StateAfter,
        livestate_api::proposal::Outbox,
        livestate_api::proposal::RiskLevel,
        livestate_api::proposal::ProposalStatus,
        livestate_api::proposal::Verdict,
        crate::sheet::Sheet,
        crate::sheet::SheetInput,
        crate::sheet::SheetStep,
        crate::sheet::Verdict,
        crate::sheet::Instant,
        crate::sheet::KindList,
        crate::sheet::KindDoc,
        crate::sheet::InputDoc,
        crate::sheet::StepDoc,
        crate::history::History,
        crate::history::Day,
        crate::history::Spread,
        crate::history::InputHistory,
        livestate_api::principal::WhoAmI,
        livestate_api::principal::Role,
        livestate_api::principal::Principals,
        livestate_api::principal::Principal,
        livestate_api::event::EventsAnswer,
        livestate_api::event::AppendedLine,
        livestate_api::read::Receipt,
        livestate_api::read::RowsAnswer,
        livestate_api::read::ConsistentAnswer,
        livestate_api::read::TableInfo,
        livestate_api::read::TableHealth,
        livestate_api::read::BucketHealth,
        livestate_api::read::TagInfo,
        livestate_api::read::TableSpend,
        livestate_api::read::Spend,
        livestate_api::read::Quarantined,
        livestate_api::read::QuarantineList,
        livestate_api::read::Firing,
        livestate_api::read::Firings,
        livestate_api::read::TableSchema,
        livestate_api::read::SchemaColumn,
        livestate_api::health::Health,
        livestate_api::health::HealthStatus,
        livestate_api::health::Stores,
        livestate_api::health::StoreMemory,
        livestate_api::ErrorBody,
        livestate_api::ErrorCode,
    )),
    modifiers(&BearerToken, &ErrorAnswers)
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

/// Every error answer is the same JSON object, `{"code": "…", "message": "…", "retryable": …}`
/// (`livestate_api::ErrorBody`, the schema `Error`); this documents it on every
/// operation, with the statuses every operation can answer whatever its handler does: 400 for
/// a parameter or body that does not fit, 401/403/429 where a token is needed, 408/413 for a
/// request body (too slow, too large), 500, and 503/507 where events are recorded.
struct ErrorAnswers;

impl Modify for ErrorAnswers {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};
        let error = || ContentBuilder::new().schema(Some(Ref::from_schema_name("Error"))).build();
        for (path, item) in openapi.paths.paths.iter_mut() {
            let ops = [
                item.get.as_mut(),
                item.put.as_mut(),
                item.post.as_mut(),
                item.delete.as_mut(),
                item.patch.as_mut(),
            ];
            for op in ops.into_iter().flatten() {
                let secured = op.security.as_ref().is_some_and(|s| !s.is_empty());
                let takes_input =
                    op.request_body.is_some() || op.parameters.as_ref().is_some_and(|p| !p.is_empty());
                let mut standard: Vec<(&str, &str)> = vec![("500", "An internal error")];
                if secured {
                    standard.extend([
                        ("401", "No token, or one that is not valid"),
                        ("403", "The caller's role may not do this"),
                        ("429", "Too many failed authentications from this address, or too many requests of this kind at once"),
                    ]);
                }
                if takes_input || secured {
                    standard.push(("400", "A parameter or body that does not fit, named"));
                }
                if op.request_body.is_some() {
                    standard.extend([
                        ("408", "The request body did not arrive in time"),
                        ("413", "The request body is larger than the limit"),
                    ]);
                }
                if path.contains('{') {
                    standard.push(("404", "No such resource (the path names one that does not exist)"));
                }
                if path == "/v1/events" || path.starts_with("/v1/proposals") {
                    standard.extend([
                        ("503", "The record refuses appends after a failed write (until a restart), or the server is stopping"),
                        ("507", "The record's disk is full; nothing was recorded"),
                    ]);
                }
                for (code, description) in standard {
                    op.responses.responses.entry(code.to_string()).or_insert_with(|| {
                        RefOr::T(
                            ResponseBuilder::new()
                                .description(description)
                                .content("application/json", error())
                                .build(),
                        )
                    });
                }
                // Statuses a handler documented without a body: the same error object.
                for (code, response) in op.responses.responses.iter_mut() {
                    if let (true, RefOr::T(r)) = (code.starts_with('4') || code.starts_with('5'), response) {
                        if r.content.is_empty() {
                            r.content.insert("application/json".into(), error());
                        }
                    }
                }
            }
        }
    }
}

/// `GET /v1/openapi.json` (no token needed).
pub(crate) async fn document() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}
