//! Answers checked against the served OpenAPI 3.1 document by an independent JSON Schema
//! 2020-12 validator (the `jsonschema` crate): the operation of the path and method, the
//! status among its documented answers, the content type, and the body against that answer's
//! schema. The schemas are read strictly: an object may carry no property its schema does not
//! name (JSON Schema would allow it). Every check is recorded, so a test can require that every
//! operation's answers were seen. A shared answer (`{"$ref": "#/components/responses/..."}`) is
//! read where it is.

use std::collections::BTreeSet;
use std::sync::Mutex;

use serde_json::{json, Value};

/// A served document, and the answers checked against it.
pub struct Document {
    doc: Value,
    strict: Value,
    checked: Mutex<BTreeSet<(String, String, u16)>>,
}

/// `/` and `~` escaped for a JSON pointer, and `{`, `}` for the URI fragment it is written in.
fn pointer_token(s: &str) -> String {
    s.replace('~', "~0")
        .replace('/', "~1")
        .replace('{', "%7B")
        .replace('}', "%7D")
}

/// Every object schema that names its properties and says nothing of others refuses others.
fn close_objects(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            if map.contains_key("properties") && !map.contains_key("additionalProperties") {
                map.insert("additionalProperties".into(), Value::Bool(false));
            }
            map.values_mut().for_each(close_objects);
        }
        Value::Array(items) => items.iter_mut().for_each(close_objects),
        _ => {}
    }
}

impl Document {
    pub fn new(doc: Value) -> Document {
        let mut strict = doc.clone();
        close_objects(&mut strict["components"]["schemas"]);
        close_objects(&mut strict["paths"]);
        Document {
            doc,
            strict,
            checked: Mutex::new(BTreeSet::new()),
        }
    }

    /// Every operation of the document, as (method, path template).
    pub fn operations(&self) -> BTreeSet<(String, String)> {
        let mut out = BTreeSet::new();
        for (path, item) in self.doc["paths"].as_object().into_iter().flatten() {
            for method in item.as_object().into_iter().flatten().map(|(m, _)| m) {
                out.insert((method.clone(), path.clone()));
            }
        }
        out
    }

    /// What was checked so far: (method, path template, status).
    pub fn checked(&self) -> BTreeSet<(String, String, u16)> {
        self.checked.lock().unwrap().clone()
    }

    /// Checks an answer (`status`, its `Content-Type`, `body`) to `method path`.
    pub fn check(
        &self,
        method: &str,
        path: &str,
        status: u16,
        content_type: &str,
        body: &Value,
    ) -> Result<(), String> {
        let template = self.template(path)?;
        let op = &self.doc["paths"][template.as_str()][method];
        if op.is_null() {
            return Err(format!("no {method} {template} in the document"));
        }
        let (answer, at) = self.answer(&template, method, status);
        let content = answer["content"].as_object().ok_or_else(|| {
            format!("{method} {template} documents no {status} answer with content")
        })?;
        let media = content_type.split(';').next().unwrap_or("").trim();
        let documented = content.get(media).ok_or_else(|| {
            format!("{method} {template} {status}: {media} is not a documented content type")
        })?;
        if !documented["schema"].is_null() {
            let at = format!("{at}/content/{}/schema", pointer_token(media));
            self.validate(&at, body)?;
        }
        self.checked
            .lock()
            .unwrap()
            .insert((method.to_owned(), template, status));
        Ok(())
    }

    /// The answer `method template` documents for `status`, a shared one
    /// (`{"$ref": "#/components/responses/..."}`) read where it is, and where it is (a `#/...`
    /// reference).
    fn answer(&self, template: &str, method: &str, status: u16) -> (&Value, String) {
        let answer = &self.doc["paths"][template][method]["responses"][status.to_string()];
        match answer["$ref"].as_str() {
            Some(at) => (
                self.doc
                    .pointer(at.trim_start_matches('#'))
                    .unwrap_or(&Value::Null),
                at.to_owned(),
            ),
            None => (
                answer,
                format!(
                    "#/paths/{}/{method}/responses/{status}",
                    pointer_token(template)
                ),
            ),
        }
    }

    /// The headers the answer of `method path` documents for `status`, in lower case.
    pub fn headers(&self, method: &str, path: &str, status: u16) -> Vec<String> {
        let Ok(template) = self.template(path) else {
            return Vec::new();
        };
        let (answer, _) = self.answer(&template, method, status);
        let names = answer["headers"].as_object().into_iter().flatten();
        names.map(|(name, _)| name.to_ascii_lowercase()).collect()
    }

    /// Validates `value` against the schema at `pointer` (a `#/...` reference into the
    /// document), with the whole document as the resource its `$ref`s resolve in.
    pub fn validate(&self, pointer: &str, value: &Value) -> Result<(), String> {
        let mut root = self.strict.clone();
        root["$ref"] = json!(pointer);
        let validator = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .should_validate_formats(true)
            .build(&root)
            .map_err(|e| format!("the document's schema at {pointer} does not compile: {e}"))?;
        let errors: Vec<String> = validator
            .iter_errors(value)
            .map(|e| format!("{}: {e}", e.instance_path()))
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("\n"))
        }
    }

    /// The document's path that `path` instantiates (`{name}` matches one segment).
    fn template(&self, path: &str) -> Result<String, String> {
        let parts: Vec<&str> = path.split('/').collect();
        let paths = self.doc["paths"]
            .as_object()
            .ok_or("the document has no paths")?;
        let matches = |t: &&String| {
            let tp: Vec<&str> = t.split('/').collect();
            tp.len() == parts.len()
                && tp
                    .iter()
                    .zip(&parts)
                    .all(|(a, b)| a == b || (a.starts_with('{') && a.ends_with('}')))
        };
        // A literal path wins over a template of the same shape.
        let mut found: Vec<&String> = paths.keys().filter(matches).collect();
        found.sort_by_key(|t| t.matches('{').count());
        found
            .first()
            .map(|t| t.to_string())
            .ok_or_else(|| format!("no path of the document matches {path}"))
    }
}

#[test]
fn the_check_refuses_what_does_not_match() {
    let doc = Document::new(json!({
        "paths": {"/p/{id}": {"get": {"responses": {"200": {"content": {"application/json":
            {"schema": {"$ref": "#/components/schemas/P"}}}}}}}},
        "components": {"schemas": {"P": {"type": "object", "required": ["a"],
            "properties": {"a": {"type": "integer"}, "b": {"type": ["string", "null"]},
                           "t": {"type": "string", "format": "date-time"},
                           "c": {"type": "array", "items": {"$ref": "#/components/schemas/Q"}}}},
            "Q": {"type": "string", "enum": ["x"]}}}
    }));
    let ok = json!({"a": 1, "b": null, "c": ["x"], "t": "2026-01-02T03:04:05Z"});
    doc.check("get", "/p/7", 200, "application/json", &ok)
        .unwrap();
    for bad in [
        json!({"b": "s"}),
        json!({"a": "1"}),
        json!({"a": 1, "b": 2}),
        json!({"a": 1, "c": ["y"]}),
        json!({"a": 1, "d": 0}),
        json!({"a": 1, "t": "yesterday"}),
    ] {
        assert!(
            doc.check("get", "/p/7", 200, "application/json", &bad)
                .is_err(),
            "{bad}"
        );
    }
    assert!(doc
        .check("get", "/p/7", 404, "application/json", &ok)
        .is_err());
    assert!(doc.check("get", "/p/7", 200, "text/plain", &ok).is_err());
    assert!(doc
        .check("post", "/p/7", 200, "application/json", &ok)
        .is_err());
    assert!(doc
        .check("get", "/q", 200, "application/json", &ok)
        .is_err());
    assert_eq!(doc.checked().len(), 1);
}

#[test]
fn a_shared_answer_is_read_where_it_is() {
    let doc = Document::new(json!({
        "paths": {"/p": {"get": {"responses": {
            "405": {"$ref": "#/components/responses/Other"}}}}},
        "components": {
            "responses": {"Other": {"description": "another method",
                "headers": {"Allow": {"schema": {"type": "string"}}},
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/E"}}}}},
            "schemas": {"E": {"type": "object", "required": ["code"],
                "properties": {"code": {"type": "string"}}}}}
    }));
    doc.check("get", "/p", 405, "application/json", &json!({"code": "x"}))
        .unwrap();
    for bad in [
        json!({}),
        json!({"code": 1}),
        json!({"code": "x", "more": 1}),
    ] {
        assert!(
            doc.check("get", "/p", 405, "application/json", &bad)
                .is_err(),
            "{bad}"
        );
    }
    assert_eq!(doc.headers("get", "/p", 405), ["allow"]);
    assert!(doc.headers("get", "/p", 200).is_empty());
}
