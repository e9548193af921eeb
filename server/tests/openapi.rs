//! `GET /api/openapi.json` on loopback: every route the API router registers is described,
//! and every route described answers (an id that does not exist, a missing sign-in, but
//! never "no such API route" or "does not take that method"); operations carry their
//! parameters, bodies and errors from the handlers' own types.

mod support;

use std::collections::{BTreeMap, BTreeSet};

use reqwest::{Method, StatusCode};
use serde_json::Value;
use support::*;

/// The paths `server/src/api/mod.rs` registers with `api_route`, as OpenAPI writes them.
fn registered() -> BTreeSet<String> {
    let src = include_str!("../src/api/mod.rs");
    let mut paths = BTreeSet::new();
    for part in src.split(".api_route(").skip(1) {
        let start = part.find('"').expect("a path") + 1;
        let end = start + part[start..].find('"').expect("a closed path");
        paths.insert(format!("/api{}", part[start..end].replace("{*", "{")));
    }
    // Nothing escapes the description: the one plain route is the document itself.
    assert_eq!(
        src.matches(".route(").count(),
        1,
        "an API route registered without api_route"
    );
    paths.insert("/api/openapi.json".into());
    paths
}

#[tokio::test]
async fn every_route_is_described_and_every_described_route_answers() {
    let h = hero(&[]).await;
    let (s, doc) = h.json(Method::GET, "/api/openapi.json", None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(
        doc["openapi"].as_str().unwrap().starts_with("3."),
        "{}",
        doc["openapi"]
    );
    let described: BTreeMap<String, Vec<String>> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(p, item)| {
            let methods = item
                .as_object()
                .unwrap()
                .keys()
                .map(|m| m.to_uppercase())
                .collect();
            (p.clone(), methods)
        })
        .collect();
    let paths: BTreeSet<String> = described.keys().cloned().collect();
    assert_eq!(paths, registered());

    // Each answers as a route of its own: whatever the refusal, not the router's.
    let anonymous = reqwest::Client::new();
    for (path, methods) in &described {
        let url = path
            .split('/')
            .map(|seg| match seg.strip_prefix('{') {
                Some(name)
                    if name.starts_with("id")
                        || name.ends_with("_id}")
                            && name != "frame_id}"
                            && name != "request_frame_id}" =>
                {
                    "999999".to_owned()
                }
                Some(_) => "x".to_owned(),
                None => seg.to_owned(),
            })
            .collect::<Vec<_>>()
            .join("/");
        for method in methods {
            let m = Method::from_bytes(method.as_bytes()).unwrap();
            for client in [&anonymous, &h.c] {
                let r = client.request(m.clone(), h.url(&url)).send().await.unwrap();
                let status = r.status();
                let body = r.text().await.unwrap_or_default();
                assert_ne!(
                    status,
                    StatusCode::METHOD_NOT_ALLOWED,
                    "{method} {url}: {body}"
                );
                assert!(
                    !body.contains("no such API route"),
                    "{method} {url}: {status} {body}"
                );
            }
        }
    }
}

#[tokio::test]
async fn operations_carry_their_parameters_bodies_and_errors() {
    let h = hero(&[]).await;
    let (_, doc) = h.json(Method::GET, "/api/openapi.json", None).await;
    if let Ok(to) = std::env::var("HERO_OPENAPI_DUMP") {
        std::fs::write(to, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    }
    let op = |path: &str, method: &str| doc["paths"][path][method].clone();
    let schema = |name: &str| doc["components"]["schemas"][name].clone();

    // A body and what it makes.
    let create = op("/api/sessions", "post");
    assert_eq!(
        create["requestBody"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/CreateSessionRequest"
    );
    assert_eq!(
        create["responses"]["201"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/SessionDto"
    );
    assert!(
        schema("SessionDto")["properties"]["name"].is_object(),
        "{}",
        schema("SessionDto")
    );
    // Path parameters named from the path, with the types the handler reads.
    let edit = op("/api/sessions/{id}/messages/{frame_id}", "put");
    let params: Vec<(String, String)> = edit["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().to_owned(),
                p["schema"]["type"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        params,
        [
            ("id".into(), "integer".into()),
            ("frame_id".into(), "string".into())
        ]
    );
    // Query parameters.
    let search = op("/api/search", "get");
    let names: Vec<&str> = search["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"q") && names.contains(&"limit"),
        "{names:?}"
    );
    // Errors: every operation that reads a sign-in says so, and how a refusal reads.
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            if path == "/api/openapi.json" || path == "/api/auth/login" {
                continue;
            }
            let refusals: Vec<&Value> = op["responses"]
                .as_object()
                .unwrap()
                .iter()
                .filter(|(code, _)| code.starts_with('4'))
                .map(|(_, r)| &r["content"]["application/json"]["schema"]["$ref"])
                .collect();
            assert!(
                !refusals.is_empty()
                    && refusals
                        .iter()
                        .all(|r| *r == "#/components/schemas/ErrorBody"),
                "{method} {path}: {refusals:?}"
            );
            assert!(
                op["responses"]["401"].is_object(),
                "{method} {path}: no 401"
            );
            let ok = op["responses"]
                .as_object()
                .unwrap()
                .keys()
                .any(|k| k.starts_with('2') || k.starts_with('3'));
            assert!(ok, "{method} {path}: no success answer");
        }
    }
    // Streams and downloads say what they are.
    let stream = op("/api/sessions/{id}/messages/stream", "post");
    assert!(
        stream["responses"]["200"]["content"]["text/event-stream"].is_object(),
        "{stream}"
    );
    let upload = op("/api/sessions/{id}/attachments", "post");
    let form = &upload["requestBody"]["content"]["multipart/form-data"]["schema"];
    assert_eq!(form["properties"]["file"]["format"], "binary", "{upload}");
    let import = op("/api/sessions/import", "post");
    assert!(
        import["requestBody"]["content"]["multipart/form-data"].is_object(),
        "{import}"
    );
    // Where the server is, and its sign-in cookie by the name its settings give it.
    assert_eq!(doc["servers"][0]["url"], "/");
    assert_eq!(
        doc["components"]["securitySchemes"]["cookie"]["name"],
        "hero_token"
    );
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
}
