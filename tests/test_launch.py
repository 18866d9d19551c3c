"""The launch scripts under tpu/: dry runs print the exact gcloud / sbatch / env commands, and train.py
arguments (gin bindings with quotes) survive every level of shell quoting. Nothing is executed."""

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tpu import common, create, delete, gpu_launch, install, launch, logs  # noqa: E402

TPU = ["--name", "codelm-v4", "--zone", "us-central2-b"]
TRAIN_ARGS = [
    "--gin_file=gin_configs/runs/pretrain.gin",
    "--gin_file=gin_configs/models/1b.gin",
    "--gin_file=gin_configs/mixtures/unimax_2.gin",
    # What the shell hands over for --gin.MODEL_DIR="'gs://b/r'": gin needs the inner quotes.
    "--gin.MODEL_DIR='gs://b/r'",
    "--gin.TRAIN_STEPS=38000",
    '--gin.NOTE="a b; $HOME `x` \\ \'q\'"',  # spaces, shell metacharacters, both kinds of quote
]
SSH = ["gcloud", "compute", "tpus", "tpu-vm", "ssh", "codelm-v4", "--zone=us-central2-b"]


def dry_run(capsys, module, argv):
    assert module.main(argv) == 0
    out = capsys.readouterr().out
    return out.splitlines()


def remote_of(line):
    """The shell line given to `gcloud ... ssh --command`, from a printed command line."""
    argv = shlex.split(line)
    assert argv[:7] == SSH
    assert argv[-2] == "--command"
    return argv, argv[-1]


def train_argv(remote):
    """The argv of `python train.py ...` in a remote shell line (up to the redirection)."""
    words = shlex.split(remote)
    i = words.index("train.py")
    assert words[i - 1] == "python"
    j = words.index(">", i)
    return words[i + 1:j]


def test_create_v4_64(capsys):
    lines = dry_run(capsys, create, TPU + ["--accelerator_type", "v4-64", "--dry_run"])
    assert lines == ["gcloud compute tpus tpu-vm create codelm-v4 --zone=us-central2-b "
                     "--accelerator-type=v4-64 --version=tpu-ubuntu2204-base"]


def test_create_options_and_generation_default_version(capsys):
    lines = dry_run(capsys, create, ["--name", "x1", "--zone", "us-east5-a", "--accelerator_type", "v5p-128",
                                     "--project", "my-proj", "--spot", "--dry_run"])
    assert lines == ["gcloud compute tpus tpu-vm create x1 --zone=us-east5-a --project=my-proj "
                     "--accelerator-type=v5p-128 --version=v2-alpha-tpuv5 --spot"]
    lines = dry_run(capsys, create, TPU + ["--accelerator_type", "v4-8", "--version", "tpu-vm-v4-base",
                                           "--dry_run"])
    assert lines[0].endswith("--accelerator-type=v4-8 --version=tpu-vm-v4-base")


def test_install_from_repo_on_all_workers(capsys):
    lines = dry_run(capsys, install, TPU + ["--repo", "https://github.com/org/codelm.git", "--ref", "v1.0",
                                            "--check", "--dry_run"])
    assert len(lines) == 2
    argv, remote = remote_of(lines[0])
    assert "--worker=all" in argv
    assert "git clone -q https://github.com/org/codelm.git ~/codelm" in remote
    assert "git -C ~/codelm fetch -q origin v1.0; git -C ~/codelm checkout -q --detach FETCH_HEAD" in remote
    assert "python3.11 -m venv .venv" in remote
    assert ".venv/bin/pip install -e \".[tpu]\"" in remote
    assert remote.index("git clone") < remote.index("-m venv") < remote.index("pip install -e")
    argv, remote = remote_of(lines[1])
    assert "--worker=all" in argv and "jax.device_count()" in remote


def test_install_from_source_dir_uses_scp_recurse(capsys, tmp_path):
    lines = dry_run(capsys, install, TPU + ["--source_dir", str(ROOT), "--stage_dir", str(tmp_path / "s"),
                                            "--dry_run"])
    assert len(lines) == 3
    assert lines[0].startswith(f"rm -rf {tmp_path / 's'} && mkdir -p {tmp_path / 's'}/codelm && tar -C {ROOT}")
    assert "--exclude=.venv" in lines[0] and "--exclude=.git" in lines[0]
    assert shlex.split(lines[1]) == ["gcloud", "compute", "tpus", "tpu-vm", "scp", "--recurse",
                                     f"{tmp_path / 's'}/codelm", "codelm-v4:~/", "--zone=us-central2-b",
                                     "--worker=all"]
    argv, remote = remote_of(lines[2])
    assert "--worker=all" in argv and "git" not in remote and ".venv/bin/pip install -e" in remote
    assert not (tmp_path / "s").exists()  # a dry run stages nothing


def test_launch_v4_64_same_train_command_on_all_workers(capsys):
    lines = dry_run(capsys, launch, TPU + ["--run_name", "1b_unimax_2", "--dry_run", "--"] + TRAIN_ARGS)
    assert len(lines) == 2  # the pre-flight here, then one ssh, --worker=all: every worker gets the same command
    argv, remote = remote_of(lines[1])
    assert "--worker=all" in argv and not any(a.startswith("--worker=") and a != "--worker=all" for a in argv)
    assert train_argv(remote) == TRAIN_ARGS  # arguments round-trip through both levels of quoting
    assert "setsid nohup python train.py" in remote
    assert '> "$LOG" 2>&1 < /dev/null &' in remote
    assert "LOG=~/codelm_logs/1b_unimax_2-worker$W.log" in remote
    assert "cd ~/codelm;" in remote and ". .venv/bin/activate;" in remote
    assert "exit 1" in remote and "kill -TERM" not in remote  # refuses to start twice unless --restart


def test_launch_remote_line_runs_in_a_shell(tmp_path):
    """Executes only the quoting: the train.py argv as a real POSIX shell parses the remote line."""
    remote = launch.remote_command(TRAIN_ARGS, "r", [], restart=False)
    words = shlex.split(remote)
    i, j = words.index("train.py"), words.index(">", words.index("train.py"))
    snippet = shlex.join([sys.executable, "-c", "import sys, json; print(json.dumps(sys.argv[1:]))"]) + " " + \
        remote.split("nohup python train.py ", 1)[1].split(" > ", 1)[0]
    out = subprocess.run(["sh", "-c", snippet], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == TRAIN_ARGS == words[i + 1:j]


def test_launch_options(capsys):
    lines = dry_run(capsys, launch, TPU + ["--run_name", "r", "--restart", "--env", "TF_CPP_MIN_LOG_LEVEL=3",
                                           "--env", "X=a b", "--project", "my-proj", "--dry_run", "--", "--x=1"])
    argv = shlex.split(lines[-1])
    assert "--project=my-proj" in argv
    remote = argv[-1]
    assert "kill -TERM -- -" in remote and "exit 1" not in remote
    assert "export TF_CPP_MIN_LOG_LEVEL=3; export X='a b'; setsid nohup python train.py --x=1 >" in remote


def test_launch_default_run_name_and_local_model_dir_warning(capsys):
    assert launch.main(TPU + ["--dry_run", "--", "--gin.MODEL_DIR='/tmp/run'"]) == 0
    captured = capsys.readouterr()
    assert "-worker$W.log" in captured.out
    assert "not a gs:// path" in captured.err


def test_logs(capsys):
    lines = dry_run(capsys, logs, TPU + ["--dry_run"])
    assert shlex.split(lines[0]) == SSH + ["--worker=0", "--command", "tail -n 100 ~/codelm_logs/latest.log"]
    lines = dry_run(capsys, logs, TPU + ["--worker", "3", "--follow", "--lines", "20", "--dry_run"])
    assert shlex.split(lines[0])[-3:] == ["--worker=3", "--command", "tail -n 20 -F ~/codelm_logs/latest.log"]
    lines = dry_run(capsys, logs, TPU + ["--log", "r-worker0.log", "--dry_run"])
    assert shlex.split(lines[0])[-1] == "tail -n 100 ~/codelm_logs/r-worker0.log"


def test_delete(capsys):
    assert dry_run(capsys, delete, TPU + ["--dry_run"]) == [
        "gcloud compute tpus tpu-vm delete codelm-v4 --zone=us-central2-b"]
    assert dry_run(capsys, delete, TPU + ["--yes", "--dry_run"]) == [
        "gcloud compute tpus tpu-vm delete codelm-v4 --zone=us-central2-b --quiet"]


def test_slurm_dry_run(capsys):
    lines = dry_run(capsys, gpu_launch, ["--slurm", "--nodes", "4", "--gpus_per_node", "8", "--partition", "gpu",
                                         "--time", "48:00:00", "--workdir", "/shared/codelm", "--dry_run",
                                         "--"] + TRAIN_ARGS)
    text = "\n".join(lines)
    assert lines[0] == "cat > codelm.sbatch <<'CODELM_SBATCH_EOF'"
    assert lines[-2:] == ["CODELM_SBATCH_EOF", "sbatch codelm.sbatch"]
    for directive in ["--nodes=4", "--ntasks-per-node=1", "--gpus-per-node=8", "--partition=gpu",
                      "--time=48:00:00", "--chdir=/shared/codelm"]:
        assert f"#SBATCH {directive}" in lines
    assert 'export JAX_COORDINATOR_ADDRESS="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1):12345"' \
        in lines
    assert 'export JAX_NUM_PROCESSES="$SLURM_NTASKS"' in lines
    assert "source /shared/codelm/.venv/bin/activate" in lines
    (srun,) = [line for line in lines if line.startswith("srun ")]
    words = shlex.split(srun)
    assert words[:3] == ["srun", "--kill-on-bad-exit=1", "bash"] and words[3] == "-c"
    inner = shlex.split(words[4])
    assert inner[:5] == ["export", "JAX_PROCESS_ID=$SLURM_PROCID;", "exec", "python", "train.py"]
    assert inner[5:] == TRAIN_ARGS
    assert text.index("JAX_COORDINATOR_ADDRESS") < text.index("srun ")


def test_slurm_writes_script_without_submitting(tmp_path, capsys):
    script = tmp_path / "job.sbatch"
    assert gpu_launch.main(["--slurm", "--nodes", "2", "--script", str(script), "--no_submit", "--",
                            "--x=1"]) == 0
    text = script.read_text()
    assert text.startswith("#!/bin/bash\n") and "#SBATCH --nodes=2" in text and "train.py --x=1'" in text


def test_plain_gpu_mode(capsys):
    lines = dry_run(capsys, gpu_launch, ["--coordinator", "10.0.0.1:1234", "--num_processes", "2",
                                         "--process_id", "1", "--dry_run", "--"] + TRAIN_ARGS)
    assert len(lines) == 1
    words = shlex.split(lines[0])
    assert words[:5] == ["JAX_COORDINATOR_ADDRESS=10.0.0.1:1234", "JAX_NUM_PROCESSES=2", "JAX_PROCESS_ID=1",
                         "python", "train.py"]
    assert words[5:] == TRAIN_ARGS


@pytest.mark.parametrize("module, argv, flag", [
    (create, TPU + ["--accelerator_type", "v4_64"], "--accelerator_type"),
    (create, TPU + ["--accelerator_type", "tpu-64"], "--accelerator_type"),
    (create, TPU + ["--accelerator_type", "v4-48"], "--accelerator_type"),
    (create, ["--name", "Bad_Name", "--zone", "us-central2-b", "--accelerator_type", "v4-64"], "--name"),
    (create, ["--name", "x", "--zone", "uscentral2", "--accelerator_type", "v4-64"], "--zone"),
    (create, TPU, "--accelerator_type"),
    (install, TPU, "--repo"),
    (install, TPU + ["--repo", "u", "--source_dir", "."], "--source_dir"),
    (install, TPU + ["--source_dir", "/nonexistent"], "--source_dir"),
    (install, TPU + ["--source_dir", str(ROOT), "--ref", "main"], "--ref"),
    (launch, TPU, "--"),
    (launch, TPU + ["--"], "--"),
    (launch, TPU + ["--gin_file=x.gin"], "after `--`"),
    (launch, TPU + ["--run_name", "a b", "--", "--x"], "--run_name"),
    (launch, TPU + ["--env", "NOEQUALS", "--", "--x"], "--env"),
    (logs, TPU + ["--worker", "w1"], "--worker"),
    (logs, TPU + ["--worker", "all", "--follow"], "--worker"),
    (gpu_launch, ["--slurm", "--", "--x"], "--nodes"),
    (gpu_launch, ["--slurm", "--nodes", "2"], "--"),
    (gpu_launch, ["--slurm", "--nodes", "0", "--", "--x"], "--nodes"),
    (gpu_launch, ["--slurm", "--nodes", "2", "--process_id", "0", "--", "--x"], "--process_id"),
    (gpu_launch, ["--num_processes", "2", "--process_id", "0", "--", "--x"], "--coordinator"),
    (gpu_launch, ["--coordinator", "host", "--num_processes", "2", "--process_id", "0", "--", "--x"],
     "--coordinator"),
    (gpu_launch, ["--coordinator", "h:1", "--num_processes", "2", "--process_id", "2", "--", "--x"],
     "--process_id"),
    (gpu_launch, ["--coordinator", "h:1", "--num_processes", "2", "--process_id", "0", "--nodes", "2", "--",
                  "--x"], "--nodes"),
])
def test_bad_input_names_the_flag(module, argv, flag, capsys):
    i = argv.index("--") if "--" in argv else len(argv)
    with pytest.raises(SystemExit) as e:
        module.main(argv[:i] + ["--dry_run"] + argv[i:])  # never runs anything, even if it did not fail
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert flag in err.split("error:", 1)[1], err


def test_scripts_run_as_files_with_help_and_dry_run():
    out = subprocess.run([sys.executable, str(ROOT / "tpu" / "launch.py"), "--help"], capture_output=True,
                         text=True, check=True).stdout
    assert "--worker=all" in out and "same" in out and "--dry_run" in out
    out = subprocess.run([sys.executable, str(ROOT / "tpu" / "delete.py"), *TPU, "--dry_run"],
                         capture_output=True, text=True, check=True).stdout
    assert out == "gcloud compute tpus tpu-vm delete codelm-v4 --zone=us-central2-b\n"


def test_runner_runs_argv_and_shell_lines_in_order_and_stops_at_failure(capsys):
    cmds = [[sys.executable, "-c", "print('one')"], "echo two | tr a-z A-Z", [sys.executable, "-c", "raise SystemExit(3)"],
            ["false-never-reached"]]
    assert common.run_commands(cmds, dry_run=False) == 3
    err = capsys.readouterr().err
    assert "exited with status 3" in err and "false-never-reached" not in err


def test_launch_sample_py_on_every_worker(capsys):
    args = ["--checkpoint=gs://b/runs/1b", "--prompts=prompts.jsonl", "--output=predictions.jsonl"]
    lines = dry_run(capsys, launch, TPU + ["--run_name", "s", "--program", "sample.py", "--dry_run", "--"] + args)
    argv, remote = remote_of(lines[0])
    assert "--worker=all" in argv
    assert "setsid nohup python sample.py --checkpoint=gs://b/runs/1b" in remote and "train.py" not in remote


def test_launch_compiles_the_step_for_the_slice_first_unless_skipped(capsys):
    """The pre-flight runs here, before the ssh; the slice comes from --accelerator_type or gcloud."""
    lines = dry_run(capsys, launch, TPU + ["--run_name", "r", "--accelerator_type", "v4-64", "--dry_run", "--"]
                    + TRAIN_ARGS)
    argv = shlex.split(lines[0])
    assert argv[1].endswith("tpu/preflight.py") and argv[2] == "--topology=v4-64" and argv[3:] == TRAIN_ARGS
    assert lines[1].startswith("gcloud compute tpus tpu-vm ssh")
    asked = dry_run(capsys, launch, TPU + ["--run_name", "r", "--dry_run", "--"] + TRAIN_ARGS)[0]
    assert ('--topology="$(gcloud compute tpus tpu-vm describe codelm-v4 --zone=us-central2-b '
            "'--format=value(acceleratorType)')\"") in asked
    assert shlex.split(asked)[3:] == TRAIN_ARGS  # after the topology, train.py's arguments unchanged
    assert launch.main(TPU + ["--run_name", "r", "--skip_preflight", "--dry_run", "--"] + TRAIN_ARGS) == 0
    captured = capsys.readouterr()
    assert len(captured.out.strip().splitlines()) == 1 and "--skip_preflight" in captured.err
    assert len(dry_run(capsys, launch, TPU + ["--run_name", "s", "--program", "sample.py", "--dry_run", "--",
                                              "--checkpoint=gs://b/r"])) == 1


def test_slurm_with_gpu_compiles_the_step_for_the_jobs_gpus_first_unless_skipped(capsys, tmp_path, monkeypatch):
    lines = dry_run(capsys, gpu_launch, ["--slurm", "--nodes", "2", "--gpu", "h100", "--dry_run", "--"] + TRAIN_ARGS)
    argv = shlex.split(lines[0])
    assert argv[1].endswith("tpu/preflight.py") and argv[2] == "--topology=h100:2x8" and argv[3:] == TRAIN_ARGS
    assert lines[1].startswith("cat > codelm.sbatch") and lines[-1] == "sbatch codelm.sbatch"
    assert gpu_launch.main(["--slurm", "--nodes", "2", "--gpu", "h100", "--skip_preflight", "--dry_run", "--"]
                           + TRAIN_ARGS) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("cat > ") and "--skip_preflight" in captured.err
    # A pre-flight that says "does not fit" (exit 1) stops before the script is written or submitted.
    monkeypatch.setattr(gpu_launch, "preflight_command", lambda *a: [sys.executable, "-c", "raise SystemExit(1)"])
    script = tmp_path / "job.sbatch"
    assert gpu_launch.main(["--slurm", "--nodes", "2", "--gpu", "h200", "--script", str(script), "--"]
                           + TRAIN_ARGS) == 1
    assert not script.exists()
    with pytest.raises(SystemExit):
        gpu_launch.main(["--coordinator", "h:1", "--num_processes", "2", "--process_id", "0", "--gpu", "h100", "--",
                         "--x"])
    assert "--gpu" in capsys.readouterr().err
