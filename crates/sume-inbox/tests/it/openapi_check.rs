//! A checker of answers against an OpenAPI 3.1 document: the operation of a path and method,
//! the schema of a status's JSON answer, and the JSON Schema keywords the document uses
//! (`$ref`, `type`, `properties`, `required`, `additionalProperties`, `items`, `oneOf`,
//! `anyOf`, `allOf`, `enum`).

use serde_json::Value;

/// A served document.
pub struct Document(pub Value);

impl Document {
    /// Checks `body`, answered `status` to `method path`, against the document.
    pub fn check(&self, method: &str, path: &str, status: u16, body: &Value) -> Result<(), String> {
        let template = self.template(path)?;
        let op = &self.0["paths"][template.as_str()][method];
        if op.is_null() {
            return Err(format!("no {method} {template} in the document"));
        }
        let response = &op["responses"][status.to_string()];
        if response.is_null() {
            return Err(format!("{method} {template} documents no {status} answer"));
        }
        let schema = &response["content"]["application/json"]["schema"];
        if schema.is_null() {
            return Err(format!("{method} {template} {status} has no JSON schema"));
        }
        self.validate(schema, body, "$")
    }

    /// The document's path that `path` instantiates (`{name}` matches one segment).
    fn template(&self, path: &str) -> Result<String, String> {
        let parts: Vec<&str> = path.split('/').collect();
        let paths = self.0["paths"]
            .as_object()
            .ok_or("the document has no paths")?;
        paths
            .keys()
            .find(|t| {
                let tp: Vec<&str> = t.split('/').collect();
                tp.len() == parts.len()
                    && tp
                        .iter()
                        .zip(&parts)
                        .all(|(a, b)| a == b || (a.starts_with('{') && a.ends_with('}')))
            })
            .cloned()
            .ok_or_else(|| format!("no path of the document matches {path}"))
    }

    fn resolve<'a>(&'a self, schema: &'a Value) -> Result<&'a Value, String> {
        match schema["$ref"].as_str() {
            Some(r) => {
                let name = r
                    .strip_prefix("#/components/schemas/")
                    .ok_or_else(|| format!("unsupported $ref {r}"))?;
                let target = &self.0["components"]["schemas"][name];
                if target.is_null() {
                    return Err(format!("$ref {r} names no schema"));
                }
                self.resolve(target)
            }
            None => Ok(schema),
        }
    }

    /// Validates `v` against `schema`; `at` names the place for the error.
    pub fn validate(&self, schema: &Value, v: &Value, at: &str) -> Result<(), String> {
        let s = self.resolve(schema)?;
        if let Some(all) = s["allOf"].as_array() {
            for sub in all {
                self.validate(sub, v, at)?;
            }
        }
        if let Some(any) = s["anyOf"].as_array() {
            if !any.iter().any(|sub| self.validate(sub, v, at).is_ok()) {
                return Err(format!("{at}: matches none of anyOf"));
            }
        }
        if let Some(one) = s["oneOf"].as_array() {
            let n = one
                .iter()
                .filter(|sub| self.validate(sub, v, at).is_ok())
                .count();
            if n != 1 {
                return Err(format!("{at}: matches {n} of oneOf, not one"));
            }
        }
        if let Some(values) = s["enum"].as_array() {
            if !values.contains(v) {
                return Err(format!("{at}: {v} is not in the enum"));
            }
        }
        if !s["type"].is_null() {
            let types: Vec<&str> = match &s["type"] {
                Value::String(t) => vec![t.as_str()],
                Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
                other => return Err(format!("{at}: odd type {other}")),
            };
            if !types.iter().any(|t| is_type(t, v)) {
                return Err(format!("{at}: {v} is not of type {types:?}"));
            }
        }
        if let Value::Object(map) = v {
            for r in s["required"].as_array().into_iter().flatten() {
                let r = r.as_str().unwrap_or_default();
                if !map.contains_key(r) {
                    return Err(format!("{at}: required {r} is missing"));
                }
            }
            let props = s["properties"].as_object();
            for (k, val) in map {
                match props.and_then(|p| p.get(k)) {
                    Some(sub) => self.validate(sub, val, &format!("{at}.{k}"))?,
                    None if s["additionalProperties"] == Value::Bool(false) => {
                        return Err(format!("{at}: {k} is not in the schema"))
                    }
                    None if props.is_some() => return Err(format!("{at}: {k} is not documented")),
                    None => {}
                }
            }
        }
        if let (Value::Array(items), Some(item)) = (v, s.get("items")) {
            for (i, x) in items.iter().enumerate() {
                self.validate(item, x, &format!("{at}[{i}]"))?;
            }
        }
        Ok(())
    }
}

fn is_type(t: &str, v: &Value) -> bool {
    match t {
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        _ => false,
    }
}

#[test]
fn the_checker_refuses_what_does_not_match() {
    let doc = Document(serde_json::json!({
        "components": {"schemas": {"P": {"type": "object", "required": ["a"],
            "properties": {"a": {"type": "integer"}, "b": {"type": ["string", "null"]},
                           "c": {"type": "array", "items": {"$ref": "#/components/schemas/Q"}}}},
            "Q": {"type": "string", "enum": ["x"]}}}
    }));
    let p = serde_json::json!({"$ref": "#/components/schemas/P"});
    assert!(doc
        .validate(&p, &serde_json::json!({"a": 1, "b": null, "c": ["x"]}), "$")
        .is_ok());
    for bad in [
        serde_json::json!({"b": "s"}),
        serde_json::json!({"a": "1"}),
        serde_json::json!({"a": 1, "b": 2}),
        serde_json::json!({"a": 1, "c": ["y"]}),
        serde_json::json!({"a": 1, "d": 0}),
    ] {
        assert!(doc.validate(&p, &bad, "$").is_err(), "{bad}");
    }
}
