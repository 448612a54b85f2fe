use super::*;
use crate::status_client::MAX_ANSWER_BYTES;

/// A page body of `jobs` entries `{"id":"job_N","status":"completed","result":"xxx..."}`,
/// each result `size` bytes, cut at the cap.
fn cut_page(head: &str, jobs: usize, size: usize) -> Vec<u8> {
    let entries: Vec<String> = (0..jobs)
        .map(|n| {
            format!(
                r#"{{"id":"job_{n}","status":"completed","result":{{"text":"{}"}}}}"#,
                "x".repeat(size)
            )
        })
        .collect();
    let mut body = format!(
        r#"{head}"data":[{}],"has_more":true,"next_cursor":"c"}}"#,
        entries.join(",")
    )
    .into_bytes();
    assert!(body.len() > MAX_ANSWER_BYTES);
    body.truncate(MAX_ANSWER_BYTES);
    body
}

/// Where the cut falls in `cut_page`'s body: the entries whose `,` after them came before it.
fn whole_before_cut(head: &str, size: usize) -> usize {
    let entry = format!(
        r#"{{"id":"job_0","status":"completed","result":{{"text":"{}"}}}}"#,
        "x".repeat(size)
    )
    .len();
    let mut end = head.len() + r#""data":["#.len();
    // Ids grow a digit at 10 and 100; entry `n` is whole once the `,` after it came.
    (0usize..)
        .find(|n| {
            end += entry + n.to_string().len() - 1 + 1;
            end > MAX_ANSWER_BYTES
        })
        .unwrap()
}

/// A page past the cap keeps the entries that came whole before the cut, the one cut in the
/// middle dropped; it says it was cut, and that nothing follows it (no cursor of a cut body is
/// trusted, though it named one before the cut).
#[test]
fn a_cut_page_keeps_the_entries_whole_before_the_cut() {
    for head in [
        "{",
        r#"{"has_more":true,"next_cursor":"c0","#,
        r#"{ "object" : "list", "meta":[1e400,{"a":[[]]}], "#,
    ] {
        let page = JobPage::read_cut(&cut_page(head, 100, 12_000)).expect(head);
        let whole = whole_before_cut(head, 12_000);
        assert!((80..100).contains(&whole), "{whole}");
        assert_eq!(page.data.len(), whole, "{head}");
        assert_eq!(page.data.last().unwrap().id, format!("job_{}", whole - 1));
        assert!(page.data.iter().all(|j| j.status == "completed"));
        assert_eq!(
            (page.cut, page.has_more, page.next_cursor, page.unread),
            (true, false, None, 0)
        );
    }
    // Entries that are no job are counted as in a whole page; one cut right after its last
    // character (before the `,` after it) is not kept.
    let mut body =
        br#"{"data":[null,{"id":"job_1","status":"running"},{"id":"job_2","status":"completed"}"#
            .to_vec();
    let whole = body.len();
    body.extend_from_slice(br#",{"id":"job_3","status":"completed","result":""#);
    body.resize(MAX_ANSWER_BYTES, b'x');
    let page = JobPage::read_cut(&body).unwrap();
    let ids: Vec<&str> = page.data.iter().map(|j| j.id.as_str()).collect();
    assert_eq!((ids, page.unread), (vec!["job_1", "job_2"], 1));
    let page = JobPage::read_cut(&body[..whole]).unwrap();
    assert_eq!(page.data.len(), 1, "{page:?}");
    // A `data` that ended before the cut is kept whole.
    let mut body = br#"{"data":[{"id":"job_1","status":"failed"}],"meta":""#.to_vec();
    body.resize(MAX_ANSWER_BYTES, b'x');
    let page = JobPage::read_cut(&body).unwrap();
    assert_eq!((page.data.len(), page.cut, page.has_more), (1, true, false));
}

/// A cut before `data`'s `[`, a `data` that is no array, a body broken before the cut, or one
/// that is no object: no page, as before.
#[test]
fn a_cut_before_data_or_in_anything_but_its_array_is_no_page() {
    for head in [
        r#"{"has_more":true,"next_cursor":""#,
        r#"{"meta":{"data":["#,
        r#"{"data":"#,
        r#"{"data":"[{\"id\":\"job_1\",\"status\":\"completed\"},"#,
        r#"{"data":{"id":"job_1","status":"completed","#,
        r#"{"data":[{"id":"job_1","status":"completed"},,{"id":""#,
        r#"{"data":[{"id":"job_1","status":"completed"}],"data":[{"id":""#,
        r#"[{"id":"job_1","status":"completed"},{"id":""#,
        r#"{"data":[{"id":"job_1","status":"completed"}]}{"x":""#,
    ] {
        let mut body = head.as_bytes().to_vec();
        body.resize(MAX_ANSWER_BYTES, b'x');
        assert_eq!(JobPage::read_cut(&body), None, "{head}");
    }
    assert_eq!(JobPage::read_cut(&[0xff; 64]), None);
}
