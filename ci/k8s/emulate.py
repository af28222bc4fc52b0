"""Runs rendered Kubernetes manifests the way a cluster would, on this machine, without one.

Reads `chaos k8s render` output, lays the ConfigMap out as its volume would be, and starts
the pods' containers as local processes with exactly the rendered args: the mock Deployment,
the N workers of the Indexed Job (each with its JOB_COMPLETION_INDEX), then the merge Job.
Only what a cluster provides is substituted: /scenario and /results become local folders, the
mock Service's name resolves to 127.0.0.1, the mock binds loopback, and env values come from
the rendered Secret. The mock's control API must answer its token (and refuse without it).
Then it checks the merged run folder. Usage: emulate.py CHAOS_BIN MANIFESTS WORKDIR
"""
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import yaml

chaos, manifests, work = sys.argv[1], sys.argv[2], sys.argv[3]
docs = [d for d in yaml.safe_load_all(open(manifests)) if d]
kinds = {(d["kind"], d["metadata"]["name"]): d for d in docs}
config = next(d for d in docs if d["kind"] == "ConfigMap")
deployment = next((d for d in docs if d["kind"] == "Deployment"), None)
service = next((d for d in docs if d["kind"] == "Service"), None)
jobs = [d for d in docs if d["kind"] == "Job"]
workers = next(j for j in jobs if j["spec"].get("completionMode") == "Indexed")
merge = next(j for j in jobs if j is not workers)
n = workers["spec"]["completions"]
assert workers["spec"]["parallelism"] == n, "parallelism = completions"

scenario_root, results = os.path.join(work, "scenario"), os.path.join(work, "results")
os.makedirs(results, exist_ok=True)
volume = next(v for v in workers["spec"]["template"]["spec"]["volumes"] if "configMap" in v)
for item in volume["configMap"]["items"]:
    path = os.path.join(scenario_root, item["path"])
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(config["data"][item["key"]])

port = 20000 + os.getpid() % 20000
service_host = service["metadata"]["name"] if service else None


def local(args, index=None):
    out = []
    for a in args:
        a = a.replace("/scenario", scenario_root).replace("/results", results)
        if index is not None:
            a = a.replace("$(JOB_COMPLETION_INDEX)", str(index))
        if service_host:
            a = a.replace(f"http://{service_host}:9000", f"http://127.0.0.1:{port}")
        a = a.replace("0.0.0.0:9000", f"127.0.0.1:{port}").replace("127.0.0.1:9900", "127.0.0.1:0")
        assert "$(" not in a, f"an unexpanded variable in {a}"
        out.append(a)
    return out


def container(obj):
    return obj["spec"]["template"]["spec"]["containers"][0]


def workdir(obj):
    """The container's working directory, as its pod would start in it."""
    return local([container(obj)["workingDir"]])[0]


def secret_env(c):
    """The container's env values that come from a rendered Secret (secretKeyRef)."""
    out = {}
    for e in c.get("env", []):
        ref = e.get("valueFrom", {}).get("secretKeyRef")
        if ref:
            secret = kinds[("Secret", ref["name"])]
            out[e["name"]] = secret["stringData"][ref["key"]]
    return out


def status(url, token=None):
    req = urllib.request.Request(url + "/_chaos/status")
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        return urllib.request.urlopen(req, timeout=10).status
    except urllib.error.HTTPError as e:
        return e.code


env = dict(os.environ, RUST_LOG="warn")
# The worker's env declares the index for $(JOB_COMPLETION_INDEX): a cluster expands only
# variables the container declares.
names = [e["name"] for e in container(workers)["env"]]
assert "JOB_COMPLETION_INDEX" in names, names
mock = None
try:
    if deployment:
        mock_env = dict(env, **secret_env(container(deployment)))
        assert "CHAOS_ADMIN_TOKEN" in mock_env, "the mock's control API token comes from the Secret"
        mock = subprocess.Popen(
            [chaos] + local(container(deployment)["args"]), stdout=subprocess.PIPE, env=mock_env, cwd=workdir(deployment)
        )
        line = mock.stdout.readline().decode()
        assert line.startswith("listening on http://127.0.0.1:"), line
        while not line.startswith("control on "):
            line = mock.stdout.readline().decode()
        control = line.split()[-1]
        line = mock.stdout.readline().decode()
        assert line == "control token " + mock_env["CHAOS_ADMIN_TOKEN"] + "\n", line
        assert status(control) == 401, "the control API answers without its token"
        assert status(control, mock_env["CHAOS_ADMIN_TOKEN"]) == 200
    procs = [
        subprocess.Popen(
            [chaos] + local(container(workers)["args"], i), stdout=subprocess.DEVNULL, env=env, cwd=workdir(workers)
        )
        for i in range(n)
    ]
    codes = [p.wait(timeout=120) for p in procs]
    assert codes == [0] * n, f"worker exit codes {codes} (a worker's pod must succeed: the gate is the merge's)"
    merged = subprocess.run(
        [chaos] + local(container(merge)["args"]), capture_output=True, env=env, timeout=120, cwd=workdir(merge)
    )
finally:
    if mock:
        mock.send_signal(signal.SIGTERM)
        mock.wait(timeout=30)
print(merged.stdout.decode())
assert merged.returncode == 0, merged.stderr.decode()
out = local(container(merge)["args"])
summary = json.load(open(os.path.join(out[out.index("--out") + 1], "summary.json")))
g = summary["generator"]
assert g["workers"] == n and g["missed"] == 0, g
# 60 req/s × 3 s, constant arrivals: 180, every one sent by its worker or counted as missed.
assert summary["totals"]["requests"] + g["missed"] == 180, (summary["totals"], g)
for i in range(n):
    shard = json.load(open(os.path.join(results, os.listdir(results)[0], f"worker-{i}", "shard.json")))
    assert shard["issued"] == 60, f"worker {i} issued {shard['issued']} of its 60"

assert summary["totals"]["upstream_attempts"] > summary["totals"]["requests"], "the storm's retries reached the shared mock"
print(f"emulated: {n} workers, {summary['totals']['requests']} requests, A = {summary['totals']['attempts_per_request']}")
