"""What an installed zring must do, run by scripts/test_wheel_install.sh and
scripts/test_sdist_install.sh in their fresh environments (in a scratch working
directory): write a store, gather from it, pack one. The argument says how it was
installed, for the closing line."""

import sys

import numpy as np

import zring

with zring.DenseWriter("labels.zr", "int64", ()) as w:
    w.append(np.arange(1000, dtype=np.int64))
labels = zring.DenseStore("labels.zr")
assert (labels[[7, 999, 0]] == [7, 999, 0]).all()

with zring.RaggedWriter("tokens.zr", "int32", 1) as w:
    for n in range(1, 200):
        w.append([np.full(n, n, dtype=np.int32)])
with zring.pack("tokens.zr", 128, rows=4) as packed:
    batch = next(packed)
assert batch["tokens"].shape == (4, 128)
print("zring", zring.__version__, sys.argv[1])
