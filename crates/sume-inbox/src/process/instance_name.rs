//! This process's name: the host's (the kernel's) with the process id and random bits, so two
//! processes never share one. It is the owner name on the sweep's leases and the instance's name
//! in the fleet's picture.

use rand::Rng;

/// The kernel's host name (gethostname(2): no file to read, so it works inside a sandbox that
/// hides /proc/sys).
pub(crate) fn kernel_hostname() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; the kernel writes a NUL-terminated name.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return None;
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8(buf[..end].to_vec()).ok()
}

/// This process's name on its leases: the host's name (the kernel's, since `HOSTNAME` is unset
/// under systemd), the process id and 64 random bits, so two processes never share a name,
/// even on hosts with one name (containers, clones).
pub fn lease_owner() -> String {
    let host = kernel_hostname()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".to_owned());
    format!(
        "{host}-{}-{:016x}",
        std::process::id(),
        rand::thread_rng().gen::<u64>()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_owners_are_unique_per_process_and_named_for_the_host() {
        let (a, b) = (lease_owner(), lease_owner());
        assert_ne!(a, b);
        assert!(
            !a.starts_with('-') && a.contains(&format!("-{}-", std::process::id())),
            "{a}"
        );
    }
}
