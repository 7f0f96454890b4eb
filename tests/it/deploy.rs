//! Checks of the deployment files that need no container engine or cluster: YAML parses and
//! says what it must, every path the Dockerfile copies exists, every environment variable
//! and configuration file names real settings, and the systemd unit says what it must (its
//! check with `systemd-analyze` is in the `external` tests, which report it as ignored, with
//! the reason, where that is not installed).
//!
//! What these cannot check — building and running the image, applying the manifests — is
//! listed in docs/deploy.md.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use imrelay::config::Settings;
use yaml_rust2::{Yaml, YamlLoader};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn yaml(rel: &str) -> Vec<Yaml> {
    YamlLoader::load_from_str(&read(rel)).unwrap_or_else(|e| panic!("{rel} is not valid YAML: {e}"))
}

/// `KEY=value` lines of an env file (comments and blanks skipped).
fn env_file(rel: &str) -> HashMap<String, String> {
    read(rel)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (k, v) = l
                .split_once('=')
                .unwrap_or_else(|| panic!("{rel}: not KEY=value: {l}"));
            (k.trim().to_string(), v.trim().to_string())
        })
        .collect()
}

/// Loads the settings these variables describe (unknown keys fail).
/// `env` with its example placeholder tokens replaced, after checking that imrelay refuses
/// to start with them as shipped.
fn with_real_tokens(mut env: HashMap<String, String>) -> HashMap<String, String> {
    let shipped = env.clone();
    let Err(e) = Settings::load_with_env(None, Some(shipped)) else {
        panic!("the example's placeholder tokens were accepted");
    };
    assert!(e.to_string().contains("placeholder"), "{e}");
    for (k, v) in env.iter_mut() {
        if v.starts_with("replace-with-") {
            // A token of its own for each variable: one token in both scopes is refused.
            *v = format!("0123456789abcdef-{}", k.to_lowercase());
        }
    }
    env
}

fn settings_from(env: HashMap<String, String>, file: Option<&Path>) -> Settings {
    let env: HashMap<String, String> = env
        .into_iter()
        .filter(|(k, _)| k.starts_with("IMRELAY__"))
        .collect();
    Settings::load_with_env(file, Some(env)).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn kubernetes_manifests() {
    let kustomization = &yaml("deploy/k8s/kustomization.yaml")[0];
    let mut kinds = Vec::new();
    for res in kustomization["resources"].as_vec().expect("resources") {
        let file = format!("deploy/k8s/{}", res.as_str().unwrap());
        for doc in yaml(&file) {
            kinds.push(doc["kind"].as_str().unwrap().to_string());
            if doc["kind"].as_str() == Some("Deployment") {
                let spec = &doc["spec"];
                assert_eq!(
                    spec["replicas"].as_i64(),
                    Some(1),
                    "one replica until a shared store exists"
                );
                assert_eq!(spec["strategy"]["type"].as_str(), Some("Recreate"));
                let c = &spec["template"]["spec"]["containers"][0];
                assert_eq!(c["ports"][0]["containerPort"].as_i64(), Some(8787));
                // Readiness checks the store; liveness must not, or a full disk would get
                // the pod restarted in a loop.
                for (probe, path) in [("readinessProbe", "/healthz"), ("livenessProbe", "/livez")] {
                    assert_eq!(c[probe]["httpGet"]["path"].as_str(), Some(path), "{probe}");
                    assert_eq!(
                        c[probe]["httpGet"]["port"].as_str(),
                        Some("http"),
                        "{probe}"
                    );
                }
                assert_eq!(
                    c["securityContext"]["allowPrivilegeEscalation"].as_bool(),
                    Some(false)
                );
                assert_eq!(
                    spec["template"]["spec"]["securityContext"]["runAsNonRoot"].as_bool(),
                    Some(true)
                );
            }
            if doc["kind"].as_str() == Some("Secret") {
                let env: HashMap<String, String> = doc["stringData"]
                    .as_hash()
                    .unwrap()
                    .iter()
                    .map(|(k, v)| {
                        (
                            k.as_str().unwrap().to_string(),
                            v.as_str().unwrap().to_string(),
                        )
                    })
                    .collect();
                let mut env = env;
                env.insert("IMRELAY__SERVER__LISTEN".into(), "0.0.0.0:8787".into());
                settings_from(with_real_tokens(env), None);
            }
            if doc["kind"].as_str() == Some("ConfigMap") {
                let dir = tempfile::tempdir().unwrap();
                let path = dir.path().join("config.toml");
                std::fs::write(&path, doc["data"]["config.toml"].as_str().unwrap()).unwrap();
                settings_from(HashMap::new(), Some(&path));
            }
        }
    }
    kinds.sort();
    assert_eq!(
        kinds,
        [
            "ConfigMap",
            "Deployment",
            "PersistentVolumeClaim",
            "Secret",
            "Service"
        ]
    );
}

#[test]
fn compose_file() {
    let doc = &yaml("deploy/docker-compose.yml")[0];
    let svc = &doc["services"]["imrelay"];
    let context = root()
        .join("deploy")
        .join(svc["build"]["context"].as_str().unwrap());
    assert!(
        context
            .join(svc["build"]["dockerfile"].as_str().unwrap())
            .is_file()
    );
    assert!(svc["volumes"][0].as_str().unwrap().ends_with(":/data"));
    // compose reads .env; the example beside it must hold valid settings.
    assert_eq!(svc["env_file"][0].as_str(), Some(".env"));
    let mut env = env_file("deploy/.env.example");
    env.retain(|k, _| k.starts_with("IMRELAY__"));
    env.insert("IMRELAY__SERVER__LISTEN".into(), "0.0.0.0:8787".into());
    settings_from(with_real_tokens(env), None);
    assert_eq!(
        svc["build"]["args"]["IMRELAY_GIT_COMMIT"].as_str(),
        Some("${IMRELAY_GIT_COMMIT:-unknown}"),
        "compose passes the commit to the build"
    );
}

#[test]
fn dockerfile() {
    let text = read("deploy/Dockerfile");
    let mut env = HashMap::new();
    let mut lines = text.lines().peekable();
    let mut copied = Vec::new();
    // What is in the build context when cargo first runs: cargo reads every target the
    // manifest names before it does anything, so each must be there by then.
    let mut before_cargo: Option<Vec<String>> = None;
    while let Some(line) = lines.next() {
        let line = line.trim();
        if line.starts_with("RUN ") && line.contains("cargo ") && before_cargo.is_none() {
            before_cargo = Some(copied.clone());
        }
        if let Some(rest) = line.strip_prefix("COPY ") {
            let words: Vec<&str> = rest.split_whitespace().collect();
            if words.iter().any(|w| w.starts_with("--from")) {
                continue;
            }
            let sources: Vec<&str> = words
                .iter()
                .copied()
                .filter(|w| !w.starts_with("--"))
                .collect();
            for src in &sources[..sources.len() - 1] {
                copied.push(src.to_string());
                assert!(
                    root().join(src).exists(),
                    "the Dockerfile copies {src}, which does not exist"
                );
            }
        }
        if let Some(rest) = line.strip_prefix("ENV ") {
            let mut joined = rest.to_string();
            while joined.ends_with('\\') {
                joined.pop();
                joined.push(' ');
                joined.push_str(lines.next().unwrap_or("").trim());
            }
            for pair in joined.split_whitespace() {
                if let Some((k, v)) = pair.split_once('=') {
                    env.insert(k.to_string(), v.to_string());
                }
            }
        }
    }
    let before_cargo = before_cargo.expect("the Dockerfile runs cargo");
    let manifest: toml::Table = toml::from_str(&read("Cargo.toml")).unwrap();
    let mut targets = Vec::new();
    for (kind, dir) in [
        ("bin", "src/bin"),
        ("bench", "benches"),
        ("example", "examples"),
        ("test", "tests"),
    ] {
        for t in manifest
            .get(kind)
            .and_then(|v| v.as_array())
            .into_iter()
            .flatten()
        {
            let path = t.get("path").and_then(|p| p.as_str()).map(str::to_string);
            let name = t["name"].as_str().unwrap();
            targets.push(path.unwrap_or_else(|| format!("{dir}/{name}.rs")));
        }
    }
    for target in targets.iter().filter(|t| !t.starts_with("src/")) {
        assert!(
            before_cargo
                .iter()
                .any(|c| target.starts_with(c.trim_end_matches('/'))),
            "the Dockerfile runs cargo before copying {target}, which Cargo.toml names"
        );
    }
    for needed in ["Cargo.toml", "Cargo.lock", "src", "config", "build.rs"] {
        assert!(
            copied.iter().any(|c| c.starts_with(needed)),
            "the image build needs {needed}"
        );
    }
    assert!(
        text.contains("--locked"),
        "reproducible builds use --locked"
    );
    assert!(text.contains("EXPOSE 8787"));
    assert!(text.contains("HEALTHCHECK") && text.contains("\"healthcheck\""));
    assert!(text.contains("USER 65532"), "runs as a non-root user");
    assert!(text.contains("VOLUME [\"/data\"]"));
    // The image listens on 0.0.0.0, so it needs tokens; with them its ENV is valid.
    assert_eq!(
        env.get("IMRELAY__SERVER__LISTEN").map(String::as_str),
        Some("0.0.0.0:8787")
    );
    let mut without_tokens = env.clone();
    without_tokens.retain(|k, _| k.starts_with("IMRELAY__"));
    assert!(
        Settings::load_with_env(None, Some(without_tokens)).is_err(),
        "no tokens must be refused"
    );
    env.insert(
        "IMRELAY__AUTH__AGENT_TOKENS".into(),
        "agent-token-0123456789".into(),
    );
    env.insert(
        "IMRELAY__AUTH__OPERATOR_TOKENS".into(),
        "operator-token-0123456789".into(),
    );
    let s = settings_from(env, None);
    assert_eq!(s.store.path, Path::new("/data/imrelay.db"));
}

#[test]
fn systemd_unit() {
    let unit = read("deploy/systemd/imrelay.service");
    for directive in [
        "DynamicUser=yes",
        "StateDirectory=imrelay",
        "ProtectSystem=strict",
        "NoNewPrivileges=yes",
        "RestrictAddressFamilies=",
        "CapabilityBoundingSet=",
        "SystemCallFilter=@system-service",
        "EnvironmentFile=-/etc/imrelay/imrelay.env",
        "--config /etc/imrelay/config.toml",
    ] {
        assert!(unit.contains(directive), "the unit lacks {directive}");
    }
    let env: HashMap<String, String> = unit
        .lines()
        .filter_map(|l| l.strip_prefix("Environment="))
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .chain(env_file("deploy/systemd/imrelay.env"))
        .collect();
    let s = settings_from(
        with_real_tokens(env),
        Some(&root().join("deploy/systemd/config.toml")),
    );
    // In the StateDirectory, and named by the config file the CLI reads too.
    assert_eq!(s.store.path, Path::new("/var/lib/imrelay/imrelay.db"));
    assert!(
        !unit.contains("IMRELAY__STORE__PATH"),
        "the store path belongs in config.toml"
    );
}

/// The documents of the kustomization in `dir`, by kind.
fn kustomized(dir: &str) -> HashMap<String, Yaml> {
    let kustomization = &yaml(&format!("{dir}/kustomization.yaml"))[0];
    let mut docs = HashMap::new();
    for res in kustomization["resources"].as_vec().expect("resources") {
        for doc in yaml(&format!("{dir}/{}", res.as_str().unwrap())) {
            let kind = doc["kind"].as_str().unwrap().to_string();
            assert!(docs.insert(kind.clone(), doc).is_none(), "two {kind}s");
        }
    }
    docs
}

#[test]
fn kubernetes_manifests_for_several_replicas() {
    let docs = kustomized("deploy/k8s-replicas");
    let mut kinds: Vec<&str> = docs.keys().map(String::as_str).collect();
    kinds.sort();
    assert_eq!(
        kinds,
        [
            "ConfigMap",
            "Deployment",
            "PodDisruptionBudget",
            "Secret",
            "Service"
        ],
        "no volume: the replicas share PostgreSQL"
    );
    let deployment = &docs["Deployment"];
    let spec = &deployment["spec"];
    assert_eq!(spec["replicas"].as_i64(), Some(2));
    assert_eq!(spec["strategy"]["type"].as_str(), Some("RollingUpdate"));
    assert_eq!(
        spec["strategy"]["rollingUpdate"]["maxUnavailable"].as_i64(),
        Some(0)
    );
    let labels = &spec["selector"]["matchLabels"];
    let pdb = &docs["PodDisruptionBudget"];
    assert_eq!(pdb["apiVersion"].as_str(), Some("policy/v1"));
    assert_eq!(pdb["spec"]["minAvailable"].as_i64(), Some(1));
    assert_eq!(&pdb["spec"]["selector"]["matchLabels"], labels);
    assert_eq!(&docs["Service"]["spec"]["selector"], labels);
    assert!(
        docs["Service"]["spec"]["sessionAffinity"].is_badvalue(),
        "nothing sticky"
    );
    let c = &spec["template"]["spec"]["containers"][0];
    for (probe, path) in [("readinessProbe", "/healthz"), ("livenessProbe", "/livez")] {
        assert_eq!(c[probe]["httpGet"]["path"].as_str(), Some(path), "{probe}");
    }
    assert!(
        c["volumeMounts"]
            .as_vec()
            .unwrap()
            .iter()
            .all(|m| m["name"].as_str() == Some("config"))
    );

    // The Secret's variables and the ConfigMap's file, as the pod gets them, load as
    // settings for PostgreSQL.
    let mut env: HashMap<String, String> = docs["Secret"]["stringData"]
        .as_hash()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().unwrap().to_string(),
                v.as_str().unwrap().to_string(),
            )
        })
        .collect();
    for e in c["env"].as_vec().unwrap() {
        env.insert(
            e["name"].as_str().unwrap().to_string(),
            e["value"].as_str().unwrap().to_string(),
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    std::fs::write(
        &path,
        docs["ConfigMap"]["data"]["config.toml"].as_str().unwrap(),
    )
    .unwrap();
    let s = settings_from(with_real_tokens(env), Some(&path));
    assert_eq!(s.store.backend, imrelay::config::Backend::Postgres);
    assert!(s.store.url.expose().starts_with("postgres://"));
}

#[test]
fn compose_file_for_several_replicas() {
    let doc = &yaml("deploy/docker-compose.replicas.yml")[0];
    let services = &doc["services"];
    let nginx_conf = read("deploy/nginx-replicas.conf");
    for name in ["imrelay-a", "imrelay-b"] {
        let svc = &services[name];
        let env = &svc["environment"];
        assert_eq!(
            env["IMRELAY__STORE__BACKEND"].as_str(),
            Some("postgres"),
            "{name}"
        );
        assert!(
            env["IMRELAY__STORE__URL"]
                .as_str()
                .unwrap()
                .contains("@postgres:5432/"),
            "{name}"
        );
        assert_eq!(
            svc["depends_on"]["postgres"]["condition"].as_str(),
            Some("service_healthy")
        );
        assert!(
            svc["ports"].is_badvalue(),
            "{name} is reached through nginx only"
        );
        assert!(
            nginx_conf.contains(&format!("server {name}:8787")),
            "nginx sends requests to {name}"
        );
        // The variables compose passes, with the example's, load as settings.
        let mut vars = env_file("deploy/.env.example");
        vars.retain(|k, _| k.starts_with("IMRELAY__"));
        for (k, v) in env.as_hash().unwrap() {
            let v = v
                .as_str()
                .unwrap()
                .replace("${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD in .env}", "pw");
            vars.insert(k.as_str().unwrap().to_string(), v);
        }
        let s = settings_from(with_real_tokens(vars), None);
        assert_eq!(s.store.backend, imrelay::config::Backend::Postgres);
    }
    assert!(
        services["postgres"]["healthcheck"]["test"]
            .as_vec()
            .is_some()
    );
    assert_eq!(
        services["nginx"]["volumes"][0].as_str(),
        Some("./nginx-replicas.conf:/etc/nginx/conf.d/default.conf:ro")
    );
    // Nothing sticky, and long polls and event streams pass through unbuffered and open.
    let directives: String = nginx_conf
        .lines()
        .map(|l| l.split('#').next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n");
    for sticky in ["ip_hash", "sticky", "hash "] {
        assert!(!directives.contains(sticky), "{sticky}");
    }
    assert!(nginx_conf.contains("proxy_buffering off;"));
    assert!(nginx_conf.contains("proxy_read_timeout 3700s;"));
}
