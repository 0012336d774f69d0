//! `team_record`: what recording a team run costs, against the same team unrecorded,
//! measured in the same process.
//!
//! The team is the repository's example (`examples/team`: a leader delegating to three
//! teammates on the offline demo model, every member in this process), run from code as
//! an SDK user runs it (`TeamRun` … `PreparedTeam::run`). The recorded passes give it a
//! SQLite store (`TeamRun::store`; WAL, `synchronous = FULL`, as the CLI's default), so
//! the team's own run and its four members' runs are written as durable runs.
//!
//! Passes alternate, unrecorded then recorded, three times; each reports CPU time (user +
//! system, every thread, `/proc/self/stat`) and wall time per team run. The ratio of the
//! sums is printed.
//!
//! `cargo bench -p troupe-workers --bench team_record` (about two minutes: the demo model
//! paces its replies, so a team run takes seconds of wall time). Outside `cargo
//! bench` each pass is a single run: that only checks that both work.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use troupe_runtime::Durability;
use troupe_testkit::process::{TICK_MICROS, process_cpu_ticks};
use troupe_workers::team_run::{TeamFiles, TeamRun};

/// The example team with every member local, its agents next to it.
fn example_team(dir: &Path) -> TeamFiles {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/team");
    let team = std::fs::read_to_string(example.join("team.toml")).expect("reads the example");
    let local = team.replace(r#"isolation = "process""#, r#"isolation = "local""#);
    std::fs::write(dir.join("team.toml"), local).expect("writes the team file");
    std::fs::create_dir_all(dir.join("agents")).expect("creates agents/");
    for entry in std::fs::read_dir(example.join("agents")).expect("lists the example's agents") {
        let path = entry.expect("an entry").path();
        std::fs::copy(&path, dir.join("agents").join(path.file_name().expect("a name"))).expect("copies");
    }
    let agents: Vec<PathBuf> = vec![dir.to_owned()];
    TeamFiles::load(&dir.join("team.toml"), &agents).expect("the team and its agents load")
}

/// CPU and wall time of `runs` team runs, one after another.
async fn pass(files: &TeamFiles, workspace: &Path, durability: Option<&Durability>, runs: usize) -> (f64, Duration) {
    let cpu = process_cpu_ticks().unwrap_or(0);
    let started = Instant::now();
    for _ in 0..runs {
        let mut run = TeamRun::new(files, workspace);
        if let Some(durability) = durability {
            run = run.store(durability.clone());
        }
        let team = run.prepare().await.expect("the members build");
        let report = team.run("Describe this repository", None, CancellationToken::new()).await;
        assert_eq!(report.failure(), None, "{report:?}");
        assert_eq!(report.run_id.is_some(), durability.is_some(), "recorded exactly when a store is given");
    }
    let ticks = process_cpu_ticks().unwrap_or(0).saturating_sub(cpu);
    (ticks as f64 * TICK_MICROS, started.elapsed())
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    if std::env::args().any(|a| a == "--list") {
        println!("team_record: bench");
        return;
    }
    let (rounds, runs) = if full { (3, 6) } else { (1, 1) };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime");
    let scratch = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("a scratch directory");
    let (team_dir, workspace) = (scratch.path().join("team"), scratch.path().join("workspace"));
    std::fs::create_dir_all(&team_dir).expect("the team's directory");
    std::fs::create_dir_all(&workspace).expect("the workspace");
    std::fs::write(workspace.join("README.md"), "# Gadget\n\nA gadget for benchmarks.\n").expect("a README");
    let files = example_team(&team_dir);
    runtime.block_on(async {
        let url = format!("sqlite://{}", scratch.path().join("runs.db").display());
        let durability = Durability::new(troupe_store::open(&url).await.expect("the store opens"));
        // Warm-up: the allocator, the store's statements, the page cache.
        pass(&files, &workspace, None, 1).await;
        pass(&files, &workspace, Some(&durability), 1).await;
        let (mut plain, mut recorded) = ((0.0, Duration::ZERO), (0.0, Duration::ZERO));
        for _ in 0..rounds {
            let (cpu, wall) = pass(&files, &workspace, None, runs).await;
            plain = (plain.0 + cpu, plain.1 + wall);
            let (cpu, wall) = pass(&files, &workspace, Some(&durability), runs).await;
            recorded = (recorded.0 + cpu, recorded.1 + wall);
        }
        let total = (rounds * runs) as f64;
        let per = |(cpu, wall): (f64, Duration)| (cpu / total, wall.as_secs_f64() * 1e6 / total);
        let (plain, recorded) = (per(plain), per(recorded));
        println!("team_record: {} team runs each (leader + 3 members, demo model, every member local)", total);
        println!("team_record: unrecorded  {:>9.0} µs CPU  {:>9.0} µs wall per team run", plain.0, plain.1);
        println!("team_record: recorded    {:>9.0} µs CPU  {:>9.0} µs wall per team run", recorded.0, recorded.1);
        println!(
            "team_record: recorded vs unrecorded: CPU {:.2}×, wall {:.2}×",
            recorded.0 / plain.0.max(1.0),
            recorded.1 / plain.1.max(1.0)
        );
        durability.store().close().await.expect("the store closes");
    });
}
