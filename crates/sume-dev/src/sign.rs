//! `sume-dev sign`: a correctly signed test webhook, as headers or as a curl command. The
//! signing itself is `sume_wire`'s, the one the daemon verifies with.

use std::time::{SystemTime, UNIX_EPOCH};

use clap::Args;
use sume_wire::{headers, signature_header, Secret};

/// The flags of `sume-dev sign`: the secret, the event to sign and how to print it.
#[derive(Debug, Args)]
pub struct SignArgs {
    /// The signing secret (the first of SUME_WEBHOOK_SECRET when not given).
    #[arg(long, env = "SUME_WEBHOOK_SECRET", hide_env_values = true)]
    pub secret: String,
    /// The job the event is for (builds a `job.completed` body).
    #[arg(long, conflicts_with = "body")]
    pub job_id: Option<String>,
    /// A raw body to sign instead.
    #[arg(long)]
    pub body: Option<String>,
    /// The status of the generated event.
    #[arg(long, default_value = "completed")]
    pub status: String,
    /// X-Sume-Event-Id (default: derived from job id and status).
    #[arg(long)]
    pub event_id: Option<String>,
    /// Unix seconds (default: now).
    #[arg(long)]
    pub timestamp: Option<i64>,
    /// Print a curl command that posts the event to this URL, instead of the headers.
    #[arg(long)]
    pub curl: Option<String>,
}

/// The lines to print.
pub fn render(args: &SignArgs) -> Result<String, String> {
    let secret = args
        .secret
        .split(',')
        .map(str::trim)
        .find(|s| !s.is_empty())
        .ok_or("--secret (SUME_WEBHOOK_SECRET) is empty")?;
    let body = match (&args.body, &args.job_id) {
        (Some(body), _) => body.clone(),
        (None, Some(job_id)) => serde_json::json!({
            "event": format!("job.{}", args.status),
            "job_id": job_id,
            "status": args.status,
        })
        .to_string(),
        (None, None) => return Err("give --job-id or --body".to_owned()),
    };
    let timestamp = args.timestamp.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0)
    });
    let event_id = args.event_id.clone().unwrap_or_else(|| match &args.job_id {
        Some(job) => format!("evt_{job}_{}", args.status),
        None => sume_wire::body_key(body.as_bytes()),
    });
    let signature = signature_header(&[Secret::new(secret)], timestamp, body.as_bytes());
    let lines = [
        (headers::EVENT_ID, event_id),
        (headers::TIMESTAMP, timestamp.to_string()),
        (headers::SIGNATURE, signature),
    ];
    Ok(match &args.curl {
        None => lines
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .chain(std::iter::once(format!("\n{body}")))
            .collect::<Vec<_>>()
            .join("\n"),
        Some(url) => {
            let mut cmd = format!(
                "curl -sS -i -X POST {} -H 'content-type: application/json'",
                quote(url)
            );
            for (k, v) in &lines {
                cmd.push_str(&format!(" -H {}", quote(&format!("{k}: {v}"))));
            }
            cmd.push_str(&format!(" --data-raw {}", quote(&body)));
            cmd
        }
    })
}

/// Single-quotes for a POSIX shell.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> SignArgs {
        SignArgs {
            secret: "dev,other".into(),
            job_id: Some("job_1".into()),
            body: None,
            status: "completed".into(),
            event_id: None,
            timestamp: Some(1_700_000_000),
            curl: None,
        }
    }

    #[test]
    fn headers_verify_with_the_first_secret() {
        let out = render(&args()).unwrap();
        let body = out.rsplit('\n').next().unwrap();
        let sig = out
            .lines()
            .find_map(|l| l.strip_prefix("x-sume-signature: "))
            .unwrap();
        let ok = sume_wire::verify(
            sume_wire::SignedHeaders {
                timestamp: Some("1700000000"),
                signature: Some(sig),
            },
            body.as_bytes(),
            &[Secret::new("dev")],
            1_700_000_000,
            300,
        );
        assert_eq!(ok, Ok(0));
        assert!(out.contains("x-sume-event-id: evt_job_1_completed"));
    }

    #[test]
    fn curl_quotes_the_body() {
        let mut a = args();
        a.body = Some(r#"{"job_id":"it's"}"#.into());
        a.job_id = None;
        a.curl = Some("http://127.0.0.1:8080/webhooks/sume".into());
        let out = render(&a).unwrap();
        assert!(out.starts_with("curl -sS -i -X POST 'http://127.0.0.1:8080/webhooks/sume'"));
        assert!(out.ends_with(r#"--data-raw '{"job_id":"it'\''s"}'"#));
    }
}
