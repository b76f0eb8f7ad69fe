//! `/api/internal_accounts/{id}/balance_reports[/{id}]`: the balances banks reported for an
//! internal account (SPEC B5). Read only: the bank's statements make them.

use axum::extract::{FromRequestParts, Path, State};
use axum::http::request::Parts;
use axum::response::Response;

use super::PageParams;
use super::{ok_json, param};
use crate::app::AppState;
use crate::domain::balance_report::{self, BalanceReport, BalanceReportFilter};
use crate::error::Error;
use crate::http::auth::Principal;
use crate::http::extract::{PathId, QueryParams};
use crate::http::pagination::Paging;

/// `{id}` (the internal account) and `{report_id}` of a report's path.
pub struct ReportPath {
    account_id: String,
    report_id: String,
}

impl<S: Send + Sync> FromRequestParts<S> for ReportPath {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Path((account_id, report_id)) = Path::<(String, String)>::from_request_parts(parts, state)
            .await
            .map_err(|_| Error::NotFound { message: "resource not found".into() })?;
        Ok(ReportPath { account_id, report_id })
    }
}

#[utoipa::path(
    get,
    path = "/api/internal_accounts/{id}/balance_reports",
    tag = "balance_reports",
    operation_id = "listBalanceReports",
    params(
        ("id" = String, Path, description = "The internal account's id."),
        PageParams,
        ("as_of_date" = Option<String>, Query, format = Date),
        ("balance_report_type" = Option<String>, Query, description = "intraday, other, previous_day or real_time."),
    ),
    responses(
        (status = 200, description = "A page of the account's balance reports, newest first.", body = [BalanceReport]),
    ),
)]
pub async fn list(
    State(state): State<AppState>,
    principal: Principal,
    paging: Paging,
    PathId(account_id): PathId,
    query: QueryParams,
) -> Result<Response, Error> {
    let scope = principal.scope();
    let filter = BalanceReportFilter { as_of_date: param(&query, "as_of_date"), balance_report_type: param(&query, "balance_report_type") };
    Ok(paging.reply(balance_report::list(&state.ctx(&scope), &account_id, &filter, paging.spec).await?))
}

#[utoipa::path(
    get,
    path = "/api/internal_accounts/{id}/balance_reports/{report_id}",
    tag = "balance_reports",
    operation_id = "retrieveBalanceReport",
    params(
        ("id" = String, Path, description = "The internal account's id."),
        ("report_id" = String, Path, description = "The balance report's id."),
    ),
    responses((status = 200, description = "The balance report.", body = BalanceReport)),
)]
pub async fn retrieve(State(state): State<AppState>, principal: Principal, path: ReportPath) -> Result<Response, Error> {
    let scope = principal.scope();
    Ok(ok_json(balance_report::get(&state.ctx(&scope), &path.account_id, &path.report_id).await?))
}
