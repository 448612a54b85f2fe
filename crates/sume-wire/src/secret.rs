//! A secret string that never prints itself: webhook signing secrets and API keys, on both
//! sides of the wire.

use std::fmt;

/// A signing secret or API key. `Debug` and `Display` print `***`, so a config struct that holds
/// one can be logged whole without leaking it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps `value` as given (nothing is trimmed): an HMAC under `"key "` is not one under
    /// `"key"`.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret itself: call only where it is used (an HMAC, an `Authorization` header).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_prints_itself() {
        let s = Secret::new("whsec_hunter2");
        assert!(!format!("{s:?}").contains("hunter2"));
        assert!(!format!("{s}").contains("hunter2"));
        assert_eq!(s.expose(), "whsec_hunter2");
    }
}
