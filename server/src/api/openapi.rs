//! `GET /api/openapi.json`: the API described from the handlers' own types. The router is
//! an `aide` [`ApiRouter`]: each route's parameters, body and answers come from its
//! extractors and its return type (their types' schemas derived with schemars, in
//! `hero_shared::api` behind its `openapi` feature), never written by hand. What aide cannot
//! see is said here, once: how Hero's own extractors read ([`ApiJson`], [`ApiPath`],
//! [`ApiQuery`], [`Authed`]), that every failure is an [`ErrorBody`], and the answers that
//! are streams (SSE) or downloads. [`document`] then names the path parameters from each
//! path and puts the routes under `/api`.

use aide::generate::GenContext;
use aide::openapi::{
    self, MediaType, OpenApi, Operation, Parameter, ParameterData, ParameterSchemaOrContent,
    PathStyle, ReferenceOr, Response, SchemaObject, StatusCode,
};
use aide::{OperationInput, OperationOutput};
use hero_shared::api::ErrorBody;
use indexmap::IndexMap;
use schemars::JsonSchema;
use serde_json::{Value, json};

use super::{ApiError, ApiJson, ApiPath, ApiQuery, Authed, Client};

/// What a 400 says: one for every extractor, since any of a route's may refuse.
const BAD_INPUT: &str =
    "the path, the query or the body is not what this route reads: `error` says which and why";

/// Where the path parameters' schemas wait, in order, until [`document`] names them.
const PATH_TYPES: &str = "x-hero-path-types";

impl<T: JsonSchema> OperationInput for ApiJson<T> {
    fn operation_input(ctx: &mut GenContext, operation: &mut Operation) {
        axum::Json::<T>::operation_input(ctx, operation);
    }

    fn inferred_early_responses(
        ctx: &mut GenContext,
        operation: &mut Operation,
    ) -> Vec<(Option<StatusCode>, Response)> {
        refused(ctx, operation, 400, BAD_INPUT)
    }
}

impl<T: JsonSchema> OperationInput for ApiQuery<T> {
    fn operation_input(ctx: &mut GenContext, operation: &mut Operation) {
        axum::extract::Query::<T>::operation_input(ctx, operation);
    }

    fn inferred_early_responses(
        ctx: &mut GenContext,
        operation: &mut Operation,
    ) -> Vec<(Option<StatusCode>, Response)> {
        refused(ctx, operation, 400, BAD_INPUT)
    }
}

/// A path's parameters are named by the path itself (`{id}`): their schemas, in order, are
/// kept on the operation until [`document`] puts each with its name.
impl<T: JsonSchema> OperationInput for ApiPath<T> {
    fn operation_input(ctx: &mut GenContext, operation: &mut Operation) {
        let schema = ctx.schema.subschema_for::<T>().to_value();
        let types = match schema.get("prefixItems") {
            Some(Value::Array(items)) => items.clone(),
            _ => vec![schema],
        };
        operation
            .extensions
            .insert(PATH_TYPES.into(), Value::Array(types));
    }

    fn inferred_early_responses(
        ctx: &mut GenContext,
        operation: &mut Operation,
    ) -> Vec<(Option<StatusCode>, Response)> {
        refused(ctx, operation, 400, BAD_INPUT)
    }
}

/// The signed-in user: a session cookie or a bearer token.
impl OperationInput for Authed {
    fn operation_input(_: &mut GenContext, operation: &mut Operation) {
        operation.security = ["bearer", "cookie"]
            .into_iter()
            .map(|scheme| IndexMap::from_iter([(scheme.to_owned(), Vec::new())]))
            .collect();
    }

    fn inferred_early_responses(
        ctx: &mut GenContext,
        operation: &mut Operation,
    ) -> Vec<(Option<StatusCode>, Response)> {
        refused(
            ctx,
            operation,
            401,
            "not signed in, or the sign-in has ended",
        )
    }
}

impl OperationInput for Client {}

/// Every failure: `{"error": "..."}` with a 4xx a person can act on, or a 5xx whose detail
/// stays in the server's log.
impl OperationOutput for ApiError {
    type Inner = ErrorBody;

    fn operation_response(ctx: &mut GenContext, operation: &mut Operation) -> Option<Response> {
        axum::Json::<ErrorBody>::operation_response(ctx, operation)
    }

    fn inferred_responses(
        ctx: &mut GenContext,
        operation: &mut Operation,
    ) -> Vec<(Option<StatusCode>, Response)> {
        let Some(body) = Self::operation_response(ctx, operation) else {
            return Vec::new();
        };
        let said = |description: &str| Response {
            description: description.into(),
            ..body.clone()
        };
        vec![
            (
                Some(StatusCode::Range(4)),
                said(
                    "refused: `error` says why (404 for what is not the caller's, 409 for a conflict with what is stored, 413 past a bound, 429 with Retry-After)",
                ),
            ),
            (
                Some(StatusCode::Range(5)),
                said("the server failed; the detail is in its log"),
            ),
        ]
    }
}

/// An error answer of `status` for an extractor's refusal.
fn refused(
    ctx: &mut GenContext,
    operation: &mut Operation,
    status: u16,
    description: &str,
) -> Vec<(Option<StatusCode>, Response)> {
    ApiError::operation_response(ctx, operation)
        .map(|body| {
            let r = Response {
                description: description.into(),
                ..body
            };
            vec![(Some(StatusCode::Code(status)), r)]
        })
        .unwrap_or_default()
}

/// JSON answered with status `N` (201 for a thing made, 202 for work begun).
pub struct Status<const N: u16, T>(pub T);

/// `201 Created` with the thing made.
pub type Created<T> = Status<201, T>;

impl<const N: u16, T: serde::Serialize> axum::response::IntoResponse for Status<N, T> {
    fn into_response(self) -> axum::response::Response {
        let status = axum::http::StatusCode::from_u16(N)
            .unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR);
        (status, axum::Json(self.0)).into_response()
    }
}

impl<const N: u16, T: JsonSchema> OperationOutput for Status<N, T> {
    type Inner = T;

    fn operation_response(ctx: &mut GenContext, operation: &mut Operation) -> Option<Response> {
        axum::Json::<T>::operation_response(ctx, operation)
    }

    fn inferred_responses(
        ctx: &mut GenContext,
        operation: &mut Operation,
    ) -> Vec<(Option<StatusCode>, Response)> {
        Self::operation_response(ctx, operation)
            .map(|r| vec![(Some(StatusCode::Code(N)), r)])
            .unwrap_or_default()
    }
}

/// A thing put by its name: 201 when it was made, 200 when it was replaced.
pub struct Put<T> {
    pub made: bool,
    pub value: T,
}

impl<T: serde::Serialize> axum::response::IntoResponse for Put<T> {
    fn into_response(self) -> axum::response::Response {
        match self.made {
            true => Status::<201, T>(self.value).into_response(),
            false => axum::Json(self.value).into_response(),
        }
    }
}

impl<T: JsonSchema> OperationOutput for Put<T> {
    type Inner = T;

    fn operation_response(ctx: &mut GenContext, operation: &mut Operation) -> Option<Response> {
        axum::Json::<T>::operation_response(ctx, operation)
    }

    fn inferred_responses(
        ctx: &mut GenContext,
        operation: &mut Operation,
    ) -> Vec<(Option<StatusCode>, Response)> {
        let Some(r) = Self::operation_response(ctx, operation) else {
            return Vec::new();
        };
        vec![
            (Some(StatusCode::Code(200)), r.clone()),
            (Some(StatusCode::Code(201)), r),
        ]
    }
}

/// The media types of answers that are not JSON.
pub const EVENT_STREAM: &str = "text/event-stream";

/// An answer of `media` (an event stream, a download) described in `description`.
pub fn answer_of(media: &str, description: &str) -> Response {
    Response {
        description: description.into(),
        content: IndexMap::from_iter([(media.to_owned(), MediaType::default())]),
        ..Default::default()
    }
}

/// A request body of one of `media` types, described in `description`.
pub fn body_of(media: &[&str], description: &str) -> openapi::RequestBody {
    openapi::RequestBody {
        description: Some(description.into()),
        content: media
            .iter()
            .map(|m| {
                // A form's one field: the file.
                let form = *m == "multipart/form-data";
                let schema = form.then(|| SchemaObject {
                    json_schema: schemars::json_schema!({
                        "type": "object",
                        "properties": {"file": {"type": "string", "format": "binary"}},
                        "required": ["file"]
                    }),
                    example: None,
                    external_docs: None,
                });
                let media = MediaType {
                    schema,
                    ..Default::default()
                };
                ((*m).to_owned(), media)
            })
            .collect(),
        required: true,
        ..Default::default()
    }
}

/// The document: each route under `/api` (axum's `{*rest}` as OpenAPI's `{rest}`), its
/// path parameters named from the path with the schemas its handler reads, and this route
/// itself ([`as_served`] adds where the server is and how to sign in).
pub fn document(mut api: OpenApi) -> Value {
    let paths = std::mem::take(&mut api.paths).unwrap_or_default();
    let mut out = openapi::Paths::default();
    for (path, item) in paths.paths {
        let ReferenceOr::Item(mut item) = item else {
            continue;
        };
        let names: Vec<String> = path
            .split('/')
            .filter_map(|seg| seg.strip_prefix('{')?.strip_suffix('}'))
            .map(|n| n.trim_start_matches('*').to_owned())
            .collect();
        let ops = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ];
        for op in ops.into_iter().flatten() {
            name_path_parameters(op, &names);
        }
        let path = format!("/api{}", path.replace("{*", "{"));
        out.paths.insert(path, ReferenceOr::Item(item));
    }
    let mut doc = json!(api);
    doc["paths"] = json!(out.paths);
    // aide writes its schemas as draft 7 does; OpenAPI 3.1 reads JSON Schema 2020-12.
    tuples_as_2020_12(&mut doc);
    doc["paths"]["/api/openapi.json"] = json!({
        "get": {
            "description": "This document: every route of the JSON API, made from the handlers' own types.",
            "responses": {"200": {"description": "the OpenAPI document", "content": {"application/json": {}}}}
        }
    });
    doc
}

/// The document as this server serves it: where it is (its base path) and the name of its
/// sign-in cookie (which its settings choose).
pub fn as_served(doc: &Value, settings: &hero_backend::Settings) -> Value {
    let mut doc = doc.clone();
    let base = settings.base_path.trim_end_matches('/');
    doc["servers"] = json!([{"url": if base.is_empty() { "/" } else { base }}]);
    doc["components"]["securitySchemes"] = json!({
        "bearer": {"type": "http", "scheme": "bearer", "description": "the token from POST /api/auth/login"},
        "cookie": {
            "type": "apiKey",
            "in": "cookie",
            "name": hero_backend::accounts::auth::cookie_name(settings),
            "description": "the session cookie a browser's sign-in sets"
        }
    });
    doc
}

/// A tuple's schema as JSON Schema 2020-12 writes it (`prefixItems`), not as draft 7
/// (`items` as a list), and no `"default": null`, everywhere in `v`.
fn tuples_as_2020_12(v: &mut Value) {
    match v {
        Value::Object(o) => {
            if matches!(o.get("items"), Some(Value::Array(_))) {
                let items = o.remove("items").unwrap_or_default();
                o.insert("prefixItems".into(), items);
                if let Some(more) = o.remove("additionalItems") {
                    o.insert("items".into(), more);
                }
            }
            // A default of nothing says nothing (and a query's schema drops its `null`).
            if o.get("default") == Some(&Value::Null) {
                o.remove("default");
            }
            o.values_mut().for_each(tuples_as_2020_12);
        }
        Value::Array(a) => a.iter_mut().for_each(tuples_as_2020_12),
        _ => {}
    }
}

/// The path parameters `names` (in the path's order) added to `op`, each with the schema
/// its handler reads it as (a string where it reads none).
fn name_path_parameters(op: &mut Operation, names: &[String]) {
    let types: Vec<Value> = match op.extensions.shift_remove(PATH_TYPES) {
        Some(Value::Array(t)) => t,
        _ => Vec::new(),
    };
    for (i, name) in names.iter().enumerate() {
        let schema = types
            .get(i)
            .cloned()
            .unwrap_or_else(|| json!({"type": "string"}));
        let Ok(json_schema) = schemars::Schema::try_from(schema) else {
            continue;
        };
        op.parameters.push(ReferenceOr::Item(Parameter::Path {
            parameter_data: ParameterData {
                name: name.clone(),
                description: None,
                required: true,
                format: ParameterSchemaOrContent::Schema(SchemaObject {
                    json_schema,
                    example: None,
                    external_docs: None,
                }),
                extensions: IndexMap::default(),
                deprecated: None,
                example: None,
                examples: IndexMap::default(),
                explode: None,
            },
            style: PathStyle::Simple,
        }));
    }
}

/// An answer that is an event stream, `$what` it carries.
macro_rules! event_stream {
    ([$($g:ident),*] $ty:ty, $what:literal) => {
        impl<$($g),*> OperationOutput for $ty {
            type Inner = Self;

            fn operation_response(_: &mut GenContext, _: &mut Operation) -> Option<Response> {
                Some(answer_of(EVENT_STREAM, $what))
            }

            fn inferred_responses(
                ctx: &mut GenContext,
                operation: &mut Operation,
            ) -> Vec<(Option<StatusCode>, Response)> {
                ok(Self::operation_response(ctx, operation))
            }
        }
    };
}

event_stream!(
    [] super::sse::TurnSse,
    "the reply as it streams: reference 000's events, message_complete always last"
);
event_stream!(
    [S] super::sse::SseBody<S>,
    "the session's events: `frame` (id: its seq) and the live events of replies in flight"
);

/// `response` as the 200 answer.
fn ok(response: Option<Response>) -> Vec<(Option<StatusCode>, Response)> {
    response
        .map(|r| vec![(Some(StatusCode::Code(200)), r)])
        .unwrap_or_default()
}

/// `op` answering `status` with `r` (for the answers no type says: downloads, a redirect).
pub fn answers(
    mut op: aide::transform::TransformOperation<'_>,
    status: u16,
    r: Response,
) -> aide::transform::TransformOperation<'_> {
    let responses = op
        .inner_mut()
        .responses
        .get_or_insert_with(Default::default);
    responses
        .responses
        .insert(StatusCode::Code(status), ReferenceOr::Item(r));
    op
}

/// `op` reading a body of one of `media` types.
pub fn reads<'t>(
    mut op: aide::transform::TransformOperation<'t>,
    media: &[&str],
    description: &str,
) -> aide::transform::TransformOperation<'t> {
    op.inner_mut().request_body = Some(ReferenceOr::Item(body_of(media, description)));
    op
}
