//! What a fault scenario's daemon writes to, and the faults done to it there: the run's
//! server directly (kill, terminate, lock, crash), through a [`Proxy`] that freezes, resets or
//! black-holes the link (freeze, reset, black-hole), or a cluster of its own on a small tmpfs
//! whose disk is filled (disk-full, [`SmallDisk`]).

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;

use super::args::{ChaosArgs, Scenario};
use super::disk::SmallDisk;
use super::faults::Figure;
use super::proxy::{time_until, Proxy};
use super::world::World;

/// One round's database and what stands between it and the daemon.
pub(super) struct Ground {
    /// The daemon's DATABASE_URL (through the proxy, with `--db-url-params`).
    pub(super) daemon_url: String,
    /// The database itself, where the inbox is read at the end.
    pub(super) read_url: String,
    proxy: Option<Proxy>,
    disk: Option<SmallDisk>,
    /// What the fault measured.
    pub(super) figures: Vec<Figure>,
}

impl Ground {
    /// A fresh database named `db_name` for `scenario`, and its proxy or disk if it has one.
    pub(super) async fn prepare(
        world: &World,
        args: &ChaosArgs,
        scenario: Scenario,
        db_name: &str,
    ) -> anyhow::Result<Ground> {
        let (read_url, disk) = if scenario == Scenario::DiskFull {
            let disk = SmallDisk::start(args, &world.work_dir, db_name).await?;
            (disk.url.clone(), Some(disk))
        } else {
            (world.database(db_name).await?, None)
        };
        let proxy = match scenario {
            Scenario::Freeze | Scenario::Reset | Scenario::BlackHole => {
                Some(Proxy::start(socket_of(&read_url)?).await?)
            }
            _ => None,
        };
        let direct = proxy
            .as_ref()
            .map_or_else(|| read_url.clone(), |p| p.url_for(&read_url));
        Ok(Ground {
            daemon_url: with_params(&direct, &args.db_url_params),
            read_url,
            proxy,
            disk,
            figures: Vec::new(),
        })
    }

    /// Does the fault of `scenario` and returns once it is over (the link thawed, the black
    /// hole lifted, the space back).
    pub(super) async fn fault(
        &mut self,
        args: &ChaosArgs,
        scenario: Scenario,
    ) -> anyhow::Result<()> {
        let hold = args.ingest_timeout * 2 + Duration::from_millis(500);
        match (scenario, self.proxy.as_mut(), self.disk.as_mut()) {
            (Scenario::Freeze, Some(proxy), _) => {
                proxy.freeze();
                tokio::time::sleep(hold).await;
                proxy.thaw();
            }
            (Scenario::Reset, Some(proxy), _) => proxy.reset(),
            (Scenario::BlackHole, Some(proxy), _) => {
                let held = proxy.established_to();
                proxy.black_hole()?;
                let gone = time_until(args.patience, || proxy.established_to() == 0).await;
                proxy.lift();
                self.figures.push(Figure::count(
                    "connections the daemon held when the black hole began",
                    held as f64,
                ));
                match gone {
                    Some(t) => self.figures.push(Figure::ms(
                        "until the daemon had given up every one of them",
                        t,
                    )),
                    None => anyhow::bail!(
                        "the daemon still held connections into the black hole after {:?}",
                        args.patience
                    ),
                }
            }
            (Scenario::DiskFull, _, Some(disk)) => {
                let filled = disk.fill()?;
                tokio::time::sleep(hold).await;
                disk.free()?;
                let back = disk.ensure_up(args.patience).await?;
                self.figures.extend([
                    Figure::count("MiB written to fill the disk", filled as f64 / 1048576.0),
                    Figure::count("PostgreSQL PANICs", disk.panics() as f64),
                    Figure::ms("PostgreSQL answering again after the space came back", back),
                ]);
            }
            (other, _, _) => anyhow::bail!("{} is not a fault of this ground", other.name()),
        }
        Ok(())
    }
}

/// The address in a `postgres://user@host:port/db` URL.
pub(super) fn socket_of(url: &str) -> anyhow::Result<SocketAddr> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let auth = rest.split('/').next().unwrap_or_default();
    let host_port = auth.rsplit_once('@').map_or(auth, |(_, h)| h);
    host_port
        .parse()
        .with_context(|| format!("no host:port in {url}"))
}

/// `url` with `params` (`a=1&b=2`) added to its query.
pub(super) fn with_params(url: &str, params: &str) -> String {
    if params.is_empty() {
        url.to_owned()
    } else if url.contains('?') {
        format!("{url}&{params}")
    } else {
        format!("{url}?{params}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_read_and_extended() {
        let url = "postgres://postgres@127.0.0.1:26001/chaos";
        assert_eq!(socket_of(url).unwrap(), "127.0.0.1:26001".parse().unwrap());
        assert_eq!(with_params(url, ""), url);
        assert_eq!(with_params(url, "a=1"), format!("{url}?a=1"));
        assert_eq!(
            with_params(&format!("{url}?x=2"), "a=1"),
            format!("{url}?x=2&a=1")
        );
    }
}
