"""torch.distributed.checkpoint with every qopt optimizer under FSDP2, saved at one world size and
loaded at others (issue 25, item 1): runs dcp_check.py (CPU processes, gloo, qopt's host backend),
which checks the restored weights and state bitwise where the form is exact, a same-world resume
bitwise against the uninterrupted run, training going on at the other world sizes, and get/set
round trips (nested, flattened, full_state_dict, broadcast from rank 0) in the saving world.

Skips, with the reason, where torch lacks FSDP2 / DCP's state_dict API (torch < 2.6, e.g. Debian's
1.13), gloo, or the host backend. The single-process tests of the same form are test_reshard.py."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import backend_available, skip_reason

SCRIPT = Path(__file__).with_name("dcp_check.py")
sys.path.insert(0, str(SCRIPT.parent))
import dcp_check  # noqa: E402


@pytest.mark.parametrize("save,load,flatten", [(2, "1,2,4", False), (4, "1,2", True),
                                               (1, "4", False)],
                         ids=["2to1-2-4", "4to1-2-flat", "1to4"])
def test_dcp_save_at_n_load_at_m(save, load, flatten, tmp_path):
    why = dcp_check.unavailable()
    if why:
        pytest.skip(why)
    if not backend_available("cpu"):
        pytest.skip(skip_reason("cpu"))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SCRIPT.parent.parent),
                                                      env.get("PYTHONPATH")]))
    env.setdefault("OMP_NUM_THREADS", "1")
    cmd = [sys.executable, str(SCRIPT), "--save", str(save), "--load", load,
           "--dir", str(tmp_path)] + (["--flatten"] if flatten else [])
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, (r.stdout[-8000:] + "\n" + r.stderr[-4000:])
    assert r.stdout.count("PASS") == len(load.split(",")), r.stdout


def test_fsdp2_unavailable_names_the_torch_it_needs():
    """qopt.fsdp2_unavailable() says why FSDP2 + DCP cannot run, independently of the imports it
    tries: a torch older than 2.6 has no DCP state_dict API for optimizers, so it must say why."""
    import torch
    import qopt
    why = qopt.fsdp2_unavailable()
    assert isinstance(why, str)
    major, minor = (int(x) for x in torch.__version__.split(".")[:2])
    if (major, minor) < (2, 6):
        assert why and "torch >= 2.6" in why, why
    elif why:
        pytest.skip(why)
