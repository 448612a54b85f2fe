//! A job's result carried as the JSON text it was stored as, never re-read into numbers: a
//! `serde_json::Value` holds a number past `i64`/`u64` as an `f64`, so `123456789012345678901`
//! read into one and written back is `123456789012345680000`. Where this service only passes a
//! result along (from an event to its job, from a job to an answer), it passes [`JsonText`].

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::Value;

/// Valid JSON text, written into an answer as it is (not re-encoded); two are equal when their
/// texts are.
#[derive(Debug, Clone)]
pub struct JsonText(Box<RawValue>);

impl JsonText {
    /// The text, when it is valid JSON.
    pub fn new(text: String) -> Option<JsonText> {
        RawValue::from_string(text).ok().map(JsonText)
    }

    /// A value's text (what a value already read holds; its numbers as read).
    pub fn of(value: &Value) -> JsonText {
        JsonText(serde_json::value::to_raw_value(value).expect("a JSON value always serialises"))
    }

    /// The JSON text.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// The text read as a value (its numbers past `i64`/`u64` as `f64`): for comparing and
    /// showing, never for storing.
    pub fn value(&self) -> Option<Value> {
        serde_json::from_str(self.get()).ok()
    }
}

impl PartialEq for JsonText {
    fn eq(&self, other: &JsonText) -> bool {
        self.get() == other.get()
    }
}

impl Serialize for JsonText {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for JsonText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<JsonText, D::Error> {
        Box::<RawValue>::deserialize(d).map(JsonText)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_past_i64_are_written_back_with_every_digit() {
        let text = r#"{"big":123456789012345678901,"dec":0.30000000000000000001}"#;
        let kept = JsonText::new(text.to_owned()).unwrap();
        assert_eq!(serde_json::to_string(&kept).unwrap(), text);
        let back: JsonText = serde_json::from_str(text).unwrap();
        assert_eq!(back, kept);
        assert_eq!(JsonText::new("{".to_owned()), None);
    }
}
