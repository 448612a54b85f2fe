//! Lists as operators write them: commas, or one entry a line (a secret file); never a value in
//! a refusal.

use super::*;

#[test]
fn api_keys() {
    let keys = parse_api_keys("SUME_API_KEYS", "main:sk_1, other:sk_2").unwrap();
    assert_eq!(keys.len(), 2);
    assert_eq!(keys[1].name, "other");
    assert_eq!(keys[1].key.expose(), "sk_2");
    for bad in ["main", "main:", ":sk", "a:1,a:2", "bad name:sk"] {
        let err = parse_api_keys("SUME_API_KEYS", bad).unwrap_err();
        assert_eq!(err.name, "SUME_API_KEYS", "{bad}");
        assert!(!err.to_string().contains("sk_"), "never echo a key: {err}");
    }
}

#[test]
fn secrets() {
    assert_eq!(parse_secrets("S", "a, b").unwrap().len(), 2);
    assert!(parse_secrets("S", "a,,b").is_err());
    assert!(parse_secrets("S", "").is_err());
}

/// `SUME_API_KEYS_FILE` holding `main:sk_1` and `other:sk_2` on two lines was one key named
/// `main` whose value held a newline (every request then failed), and `other` was lost.
#[test]
fn a_list_takes_one_entry_a_line_as_it_takes_commas() {
    for text in [
        "main:sk_1\nother:sk_2\n",
        "main:sk_1\r\nother:sk_2\r\n",
        "\nmain:sk_1\n\n  \nother:sk_2",
    ] {
        let keys = parse_api_keys("SUME_API_KEYS", text).unwrap();
        let read: Vec<(&str, &str)> = keys
            .iter()
            .map(|k| (k.name.as_str(), k.key.expose()))
            .collect();
        assert_eq!(read, [("main", "sk_1"), ("other", "sk_2")], "{text:?}");
    }
    // A comma at a line's end is a stray comma, as it is on one line.
    assert!(parse_api_keys("SUME_API_KEYS", "main:sk_1,\nother:sk_2").is_err());
    let secrets = parse_secrets("SUME_WEBHOOK_SECRET", "whsec_old\r\nwhsec_new\n").unwrap();
    let read: Vec<&str> = secrets.iter().map(|s| s.expose()).collect();
    assert_eq!(read, ["whsec_old", "whsec_new"]);
    assert_eq!(
        parse_names("ADMIN_HOSTS", "a.internal\nB.internal").unwrap(),
        ["a.internal", "b.internal"]
    );
    assert_eq!(comma_separated("a=1\r\n\nb=2\n"), "a=1,b=2");
}

#[test]
fn a_control_character_in_a_secret_or_key_is_refused_without_its_value() {
    for (text, at) in [
        ("whsec_a\tb", "item 1"),
        ("whsec_ok\nwhsec_a\u{1b}b", "item 2"),
        ("whsec_ok,whsec_a\rb", "item 2"),
    ] {
        let e = parse_secrets("SUME_WEBHOOK_SECRET", text)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("SUME_WEBHOOK_SECRET: ")
                && e.contains(at)
                && e.contains("control character"),
            "{e}"
        );
        assert!(!e.contains("whsec_"), "{e}");
    }
    let e = parse_api_keys("SUME_API_KEYS", "main:sk_a\u{7f}b")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("\"main\"") && e.contains("control character"),
        "{e}"
    );
    assert!(!e.contains("sk_"), "{e}");
    let e = parse_secret("SUME_API_KEY", "sk_a\u{0}b")
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("SUME_API_KEY: ") && !e.contains("sk_"), "{e}");
    assert_eq!(
        parse_secret("SUME_API_KEY", " sk_1 ").unwrap().expose(),
        "sk_1"
    );
}

/// The read budget is kept per key name: one key under two names, or two names Sume's
/// operators would take for one, spent Sume's limits twice without a word.
#[test]
fn one_key_under_two_names_or_two_names_one_case_apart_are_refused() {
    let e = parse_api_keys("SUME_API_KEYS", "a:sk_same,b:sk_same")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("\"a\" and \"b\" are the same key") && !e.contains("sk_same"),
        "{e}"
    );
    let e = parse_api_keys("SUME_API_KEYS", "main:sk_1\nMain:sk_2")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("differ only in case") && !e.contains("sk_"),
        "{e}"
    );
    assert!(parse_api_keys("SUME_API_KEYS", "main:sk_1,batch:sk_2").is_ok());
}

/// `SUME_API_KEYS=main:k1,` (a stray comma) was refused as "item 2 is not name:key", which
/// sent the operator looking for a malformed pair; `ADMIN_HOSTS=a,,b` was taken as `a,b`.
/// Every list of the project's own now refuses an empty entry as the stray comma it looks
/// like, by its position, never quoting an entry beside it.
#[test]
fn an_empty_entry_in_a_list_is_refused_as_a_stray_comma() {
    for (text, said) in [
        (
            "main:sk_1,",
            "entry 2 of 2 is empty (nothing after the last comma)",
        ),
        (
            "main:sk_1,,ops:sk_2",
            "entry 2 of 3 is empty (nothing between two commas)",
        ),
        (
            ",main:sk_1",
            "entry 1 of 2 is empty (nothing before the first comma)",
        ),
        ("main:sk_1, ,ops:sk_2", "entry 2 of 3 is empty"),
        ("main:sk_1,\nops:sk_2", "entry 2 of 3 is empty"),
    ] {
        let keys = parse_api_keys("SUME_API_KEYS", text);
        let secrets = parse_secrets("SUME_WEBHOOK_SECRET", text);
        let names = parse_names("ADMIN_HOSTS", &text.replace(":sk_", "-h"));
        for (e, name) in [
            (keys.map(|_| ()).unwrap_err(), "SUME_API_KEYS"),
            (secrets.map(|_| ()).unwrap_err(), "SUME_WEBHOOK_SECRET"),
            (names.map(|_| ()).unwrap_err(), "ADMIN_HOSTS"),
        ] {
            let e = e.to_string();
            assert!(e.starts_with(&format!("{name}: {said}")), "{text:?}: {e}");
            assert!(e.contains("stray comma"), "{e}");
            assert!(!e.contains("sk_") && !e.contains("main"), "{e}");
        }
    }
}
