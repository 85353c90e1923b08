//! `settee backup` and `settee restore` (`docs/format/backup.md`): a running node's store
//! copied from a checkpoint it makes, incremental against the newest complete backup in the
//! directory, complete only once its `backup.json` is in place; and a data directory made from
//! one backup, every file checked first.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{bail, Context};
use http_body_util::BodyExt;
use hyper::{Method, StatusCode};
use serde::{Deserialize, Serialize};

use crate::node_client::NodeClient;

const FORMAT: u32 = 1;
const MANIFEST: &str = "backup.json";
const PARTIAL: &str = ".partial";

#[derive(clap::Args, Debug)]
pub struct BackupArgs {
    /// The node's CouchDB API, e.g. http://admin:secret@127.0.0.1:5984 (a server admin).
    #[arg(long)]
    pub node: String,
    /// The backup directory: each backup is a subdirectory named by its UTC start time.
    #[arg(long)]
    pub to: PathBuf,
    /// No progress bar (it is also hidden when standard error is not a terminal).
    #[arg(long)]
    pub no_progress: bool,
}

#[derive(clap::Args, Debug)]
pub struct RestoreArgs {
    /// One backup: a subdirectory of a backup directory, holding backup.json.
    #[arg(long)]
    pub from: PathBuf,
    /// The new data directory (must not exist, or be empty).
    #[arg(long)]
    pub data_dir: PathBuf,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
struct FileEntry {
    name: String,
    size: u64,
    crc32c: String,
    shared: bool,
}

#[derive(Serialize, Deserialize, Debug)]
struct Manifest {
    format: u32,
    created: String,
    node: String,
    base: Option<String>,
    files: Vec<FileEntry>,
}

#[derive(Deserialize)]
struct Checkpoint {
    id: String,
    files: Vec<CheckpointFile>,
}

#[derive(Deserialize)]
struct CheckpointFile {
    name: String,
    size: u64,
}

/// Releases the node's checkpoint when the backup ends, however it ends.
struct Release<'a> {
    node: &'a NodeClient,
    id: String,
}

impl Release<'_> {
    async fn release(self) {
        let path = format!("/_node/_local/_backup/{}", self.id);
        if let Err(error) = self.node.request(Method::DELETE, &path, None).await {
            eprintln!("settee backup: could not release the node's checkpoint: {error:#}");
        }
    }
}

pub async fn backup(args: BackupArgs) -> anyhow::Result<()> {
    let node = NodeClient::parse(&args.node, "--node")?;
    std::fs::create_dir_all(&args.to).with_context(|| format!("creating {}", args.to.display()))?;
    remove_partials(&args.to)?;
    let base = newest_complete(&args.to)?;
    let created = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let name: String = created.chars().filter(|c| *c != '-' && *c != ':').collect();
    let target = args.to.join(&name);
    if target.exists() {
        bail!(
            "{} exists already (one backup per second)",
            target.display()
        );
    }
    let checkpoint: Checkpoint = node
        .json(Method::POST, "/_node/_local/_backup", StatusCode::CREATED)
        .await?;
    let release = Release {
        node: &node,
        id: checkpoint.id.clone(),
    };
    let partial = args.to.join(format!("{name}{PARTIAL}"));
    let copied = copy_files(
        &node,
        &checkpoint,
        base.as_ref(),
        &partial,
        args.no_progress,
    )
    .await;
    release.release().await;
    let files = copied?;
    let manifest = Manifest {
        format: FORMAT,
        created,
        node: node.base.clone(),
        base: base.as_ref().map(|(name, _)| name.clone()),
        files,
    };
    write_synced(
        &partial.join(MANIFEST),
        &serde_json::to_vec_pretty(&manifest)?,
    )?;
    sync_dir(&partial)?;
    std::fs::rename(&partial, &target).context("completing the backup")?;
    sync_dir(&args.to)?;
    let (shared, sizes): (usize, u64) =
        manifest.files.iter().fold((0, 0), |(shared, sizes), file| {
            (shared + usize::from(file.shared), sizes + file.size)
        });
    println!(
        "{}: {} files, {} bytes ({} files shared with {})",
        target.display(),
        manifest.files.len(),
        sizes,
        shared,
        manifest.base.as_deref().unwrap_or("no earlier backup"),
    );
    Ok(())
}

/// Downloads (or links from the base) every file of the checkpoint into `partial/db`.
async fn copy_files(
    node: &NodeClient,
    checkpoint: &Checkpoint,
    base: Option<&(String, HashMap<String, FileEntry>)>,
    partial: &Path,
    no_progress: bool,
) -> anyhow::Result<Vec<FileEntry>> {
    let db = partial.join("db");
    std::fs::create_dir_all(&db).with_context(|| format!("creating {}", db.display()))?;
    let reusable = |file: &CheckpointFile| -> Option<(PathBuf, FileEntry)> {
        let (base_name, entries) = base?;
        let entry = entries.get(&file.name)?;
        let path = partial
            .parent()?
            .join(base_name)
            .join("db")
            .join(&file.name);
        (file.name.ends_with(".sst") && entry.size == file.size && path.is_file())
            .then(|| (path, entry.clone()))
    };
    let to_download: u64 = checkpoint
        .files
        .iter()
        .filter(|file| reusable(file).is_none())
        .map(|file| file.size)
        .sum();
    let progress = if no_progress {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::with_draw_target(
            Some(to_download),
            indicatif::ProgressDrawTarget::stderr(),
        )
    };
    progress.set_style(
        indicatif::ProgressStyle::with_template("{bytes}/{total_bytes} {wide_bar} {eta}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let mut files = Vec::with_capacity(checkpoint.files.len());
    for file in &checkpoint.files {
        let path = db.join(&file.name);
        if let Some((source, entry)) = reusable(file) {
            std::fs::hard_link(&source, &path)
                .with_context(|| format!("linking {}", source.display()))?;
            files.push(FileEntry {
                shared: true,
                ..entry
            });
            continue;
        }
        let crc = download(node, &checkpoint.id, file, &path, &progress).await?;
        files.push(FileEntry {
            name: file.name.clone(),
            size: file.size,
            crc32c: format!("{crc:08x}"),
            shared: false,
        });
    }
    progress.finish_and_clear();
    sync_dir(&db)?;
    Ok(files)
}

async fn download(
    node: &NodeClient,
    id: &str,
    file: &CheckpointFile,
    path: &Path,
    progress: &indicatif::ProgressBar,
) -> anyhow::Result<u32> {
    let url_path = format!("/_node/_local/_backup/{id}/{}", file.name);
    let response = node.request(Method::GET, &url_path, None).await?;
    if response.status() != StatusCode::OK {
        bail!("GET {url_path}: {}", response.status());
    }
    let mut out =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut body = response.into_body();
    let (mut crc, mut written) = (0u32, 0u64);
    while let Some(frame) = body.frame().await {
        let frame = frame.with_context(|| format!("reading {}", file.name))?;
        if let Some(data) = frame.data_ref() {
            crc = crc32c::crc32c_append(crc, data);
            out.write_all(data)
                .with_context(|| format!("writing {}", path.display()))?;
            written += data.len() as u64;
            progress.inc(data.len() as u64);
        }
    }
    if written != file.size {
        bail!("{}: {written} bytes received of {}", file.name, file.size);
    }
    out.sync_all()
        .with_context(|| format!("syncing {}", path.display()))?;
    Ok(crc)
}

/// Removes backups a killed `settee backup` left unfinished.
fn remove_partials(dir: &Path) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        if entry.file_name().to_string_lossy().ends_with(PARTIAL) {
            std::fs::remove_dir_all(entry.path())
                .with_context(|| format!("removing {}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// The newest complete backup in `dir` (by name) and its files by name.
fn newest_complete(dir: &Path) -> anyhow::Result<Option<(String, HashMap<String, FileEntry>)>> {
    let mut names: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .filter(|entry| entry.path().join(MANIFEST).is_file())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| !name.ends_with(PARTIAL))
        .collect();
    names.sort();
    let Some(name) = names.pop() else {
        return Ok(None);
    };
    let manifest = read_manifest(&dir.join(&name))?;
    let files = manifest
        .files
        .into_iter()
        .map(|file| (file.name.clone(), file))
        .collect();
    Ok(Some((name, files)))
}

fn read_manifest(backup: &Path) -> anyhow::Result<Manifest> {
    let path = backup.join(MANIFEST);
    let text = std::fs::read(&path).with_context(|| {
        format!(
            "{} is not a complete backup (no {MANIFEST})",
            backup.display()
        )
    })?;
    let manifest: Manifest =
        serde_json::from_slice(&text).with_context(|| format!("reading {}", path.display()))?;
    if manifest.format != FORMAT {
        bail!(
            "{}: backup format {} (this binary reads {FORMAT})",
            path.display(),
            manifest.format
        );
    }
    Ok(manifest)
}

pub fn restore(args: RestoreArgs) -> anyhow::Result<()> {
    let manifest = read_manifest(&args.from)?;
    // Every file is checked before anything is written.
    for file in &manifest.files {
        if file.name.contains('/') || file.name == ".." || file.name == "." {
            bail!(
                "backup.json names a file outside the backup: {:?}",
                file.name
            );
        }
        let path = args.from.join("db").join(&file.name);
        let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        if bytes.len() as u64 != file.size {
            bail!(
                "{}: {} bytes, backup.json says {}",
                path.display(),
                bytes.len(),
                file.size
            );
        }
        let crc = format!("{:08x}", crc32c::crc32c(&bytes));
        if crc != file.crc32c {
            bail!(
                "{}: crc32c {crc}, backup.json says {}",
                path.display(),
                file.crc32c
            );
        }
    }
    if args.data_dir.exists()
        && std::fs::read_dir(&args.data_dir)
            .with_context(|| format!("reading {}", args.data_dir.display()))?
            .next()
            .is_some()
    {
        bail!(
            "{} is not empty: restore only into a new data directory",
            args.data_dir.display()
        );
    }
    let db = args.data_dir.join("db");
    std::fs::create_dir_all(&db).with_context(|| format!("creating {}", db.display()))?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&args.data_dir, std::fs::Permissions::from_mode(0o700))?;
    }
    for file in &manifest.files {
        let source = args.from.join("db").join(&file.name);
        let target = db.join(&file.name);
        std::fs::copy(&source, &target).with_context(|| format!("copying {}", source.display()))?;
        std::fs::File::open(&target)?.sync_all()?;
    }
    sync_dir(&db)?;
    sync_dir(&args.data_dir)?;
    println!(
        "restored {} files of the backup of {} ({}) into {}",
        manifest.files.len(),
        manifest.node,
        manifest.created,
        args.data_dir.display()
    );
    Ok(())
}

fn write_synced(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let temporary = path.with_extension("tmp");
    let mut file = std::fs::File::create(&temporary)
        .with_context(|| format!("creating {}", temporary.display()))?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&temporary, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

fn sync_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::File::open(dir)
        .and_then(|handle| handle.sync_all())
        .with_context(|| format!("syncing {}", dir.display()))
}
