//! Issue 18 point 8: the data directory is the node owner's alone (0700), its secrets are 0600,
//! and a generated admin password is printed once and kept only hashed. A data directory left
//! by an older version (0755, secrets 0644, the admin password in clear text) is tightened and
//! migrated at start, and the old password still logs in. Runs the real binary without
//! `--admin`; `SETTEE_BIN` points it at another build.

mod support;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

/// A node started without `--admin`, with what it printed.
struct Node {
    child: Child,
    addr: String,
    /// Lines of standard output and standard error, as they come.
    lines: Receiver<String>,
    printed: Vec<String>,
}

impl Node {
    fn start(data_dir: &Path) -> Node {
        let binary = std::env::var("SETTEE_BIN").unwrap_or(env!("CARGO_BIN_EXE_settee").into());
        let mut child = Command::new(binary)
            .args([
                "serve",
                "--http-addr",
                "127.0.0.1:0",
                "--kv-addr",
                "127.0.0.1:0",
                "--mgmt-addr",
                "127.0.0.1:0",
                "--pbkdf2-iterations",
                "1000",
                "--data-dir",
            ])
            .arg(data_dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn settee");
        let (sender, lines) = channel();
        let stdout = child.stdout.take().expect("stdout");
        let stderr = child.stderr.take().expect("stderr");
        let out = sender.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = out.send(line);
            }
        });
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = sender.send(line);
            }
        });
        let mut node = Node {
            child,
            addr: String::new(),
            lines,
            printed: Vec::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while node.addr.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = node.lines.recv_timeout(left).expect("settee did not start");
            if let Some(rest) = line.split("listening on http://").nth(1) {
                node.addr = rest.split_whitespace().next().expect("address").to_string();
            }
            node.printed.push(line);
        }
        node
    }

    /// The password the node printed for its generated admin, if it printed one.
    fn printed_password(&self) -> Option<String> {
        self.printed.iter().find_map(|line| {
            let rest = line.split("server admin is admin:").nth(1)?;
            Some(rest.split_whitespace().next()?.to_string())
        })
    }

    fn login_works(&self, password: &str) -> bool {
        let mut client =
            support::Client::connect_as(&self.addr, &format!("admin:{password}")).expect("connect");
        let response = client.request("GET", "/_session", None).expect("request");
        response.status == 200
            && response.json()["userCtx"]["roles"] == serde_json::json!(["_admin"])
    }

    fn stop(mut self) -> Vec<String> {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
        self.printed.extend(self.lines.try_iter());
        std::mem::take(&mut self.printed)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .expect("metadata")
        .permissions()
        .mode()
        & 0o777
}

#[test]
fn a_generated_admin_is_printed_once_and_kept_hashed_in_private_files() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let data = scratch.path().join("data");
    let node = Node::start(&data);
    let password = node
        .printed_password()
        .expect("the generated password is printed");
    assert!(node.login_works(&password));
    assert!(!node.login_works("not-the-password"));
    let first_output = node.stop();

    assert_eq!(mode(&data), 0o700, "data directory");
    for secret in ["cookie_secret", "admin_password"] {
        assert_eq!(mode(&data.join(secret)), 0o600, "{secret}");
    }
    let stored = std::fs::read_to_string(data.join("admin_password")).expect("admin_password");
    assert!(
        !stored.contains(&password),
        "the password is stored in clear"
    );
    let stored: serde_json::Value = serde_json::from_str(&stored).expect("JSON");
    assert!(stored["derived_key"].is_string(), "{stored}");
    assert_eq!(
        first_output
            .iter()
            .filter(|line| line.contains(&password))
            .count(),
        1
    );

    let again = Node::start(&data);
    assert!(again.login_works(&password), "after a restart");
    let second_output = again.stop();
    assert!(
        second_output.iter().all(|line| !line.contains(&password)),
        "printed again: {second_output:?}"
    );
}

#[test]
fn an_older_data_directory_is_tightened_and_its_clear_password_migrated() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let data = scratch.path().join("data");
    std::fs::create_dir(&data).expect("mkdir");
    let set_mode = |path: &Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod")
    };
    set_mode(&data, 0o755);
    let old_password = "0123456789abcdef01234567";
    std::fs::write(data.join("admin_password"), old_password).expect("write");
    set_mode(&data.join("admin_password"), 0o644);
    std::fs::write(data.join("cookie_secret"), [7u8; 32]).expect("write");
    set_mode(&data.join("cookie_secret"), 0o644);

    let node = Node::start(&data);
    assert!(node.login_works(old_password));
    node.stop();
    assert_eq!(mode(&data), 0o700);
    assert_eq!(mode(&data.join("admin_password")), 0o600);
    assert_eq!(mode(&data.join("cookie_secret")), 0o600);
    let stored = std::fs::read_to_string(data.join("admin_password")).expect("admin_password");
    assert!(!stored.contains(old_password), "still in clear text");
    assert_eq!(
        std::fs::read(data.join("cookie_secret")).expect("read"),
        [7u8; 32],
        "the cookie secret is kept"
    );

    let again = Node::start(&data);
    assert!(again.login_works(old_password), "after the migration");
    again.stop();
}
