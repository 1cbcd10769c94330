"""Checks by hand (not in CI) that TensorBoard's own reader reads the event files that
celer::trainer::event_file_writer writes (actors/include/celer/actors/trainer/metrics_log.hpp).

It runs the hidden unit test "[tensorboard_manual]", which writes 100 steps of two scalars
into a fresh folder, then loads that folder with TensorBoard's EventAccumulator (which
checks every record's CRCs) and compares what it reads with what was written.

    ~/.cache/celer/bench-venv/bin/pip install tensorboard
    ~/.cache/celer/bench-venv/bin/python bench/peers/tensorboard_read_events.py \
        build/tests/unit/actors/celer_actors_tests

Prints "tensorboard read ... ok" and exits 0, or says what differs and exits 1.
"""

import math
import os
import subprocess
import sys
import tempfile

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def main():
    tests = sys.argv[1] if len(sys.argv) > 1 else "build/tests/unit/actors/celer_actors_tests"
    # Not "tfevents" in the folder's name: TensorBoard would take the folder for a file.
    with tempfile.TemporaryDirectory(prefix="celer-tb-check-") as out:
        subprocess.run([tests, "[tensorboard_manual]"], check=True, stdout=subprocess.DEVNULL,
                       env=dict(os.environ, CELER_TFEVENTS_DIR=out))
        files = [f for f in os.listdir(out) if "tfevents" in f]
        if len(files) != 1:
            sys.exit(f"expected one event file in {out}, found {files}")
        acc = EventAccumulator(out)
        acc.Reload()
        tags = sorted(acc.Tags()["scalars"])
        if tags != ["loss", "train/samples_per_s"]:
            sys.exit(f"scalar tags {tags}")
        problems = []
        for tag, want in (("loss", lambda s: 2.0 / (s + 1)),
                          ("train/samples_per_s", lambda s: 1000.0 + s)):
            events = acc.Scalars(tag)
            if [e.step for e in events] != list(range(100)):
                problems.append(f"{tag}: steps {[e.step for e in events][:5]}...")
            for e in events:
                if not math.isclose(e.value, want(e.step), rel_tol=1e-6):
                    problems.append(f"{tag} at step {e.step}: {e.value}, want {want(e.step)}")
                if e.wall_time < 1.5e9:
                    problems.append(f"{tag} at step {e.step}: wall time {e.wall_time}")
        if problems:
            sys.exit("\n".join(problems[:20]))
        print(f"tensorboard read {files[0]}: {len(tags)} tags x 100 steps ok "
              f"(file_version {acc.file_version!r})")


if __name__ == "__main__":
    main()
