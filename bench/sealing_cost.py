"""What sealing costs per body: seal (receive) and open (worker, reads) of 1 KB and 16 KB,
in microseconds and per KB. A micro-measure on this process's CPU, not part of `make
bench` (whose receive and drain modes run each store with `[encryption]` on and off):
``python bench/sealing_cost.py``. Best of 5 rounds, so a shared machine's noise counts
least."""

from __future__ import annotations

import os
import timeit

from hookinbox.sealing import Sealer, payload_aad

ROUNDS = 5
CALLS = 5_000


def best_us(fn: object) -> float:
    times = timeit.repeat(fn, number=CALLS, repeat=ROUNDS)  # type: ignore[arg-type]
    return min(times) / CALLS * 1e6


def main() -> None:
    sealer = Sealer([("k1", os.urandom(32))], {"bench"})
    aad = payload_aad("dlv_01a235a6aa71514e5a7ad38d9547b131")
    print(f"{'body':>6} {'seal us':>8} {'open us':>8} {'both us':>8} {'both us/KB':>11}")
    for size in (1024, 16 * 1024):
        body = os.urandom(size)
        sealed = sealer.seal("bench", body, aad)
        seal = best_us(lambda body=body: sealer.seal("bench", body, aad))
        opened = best_us(lambda sealed=sealed: sealer.open(sealed, aad))
        both = seal + opened
        per_kb = both / (size / 1024)
        print(f"{size // 1024:>4}KB {seal:>8.2f} {opened:>8.2f} {both:>8.2f} {per_kb:>11.2f}")


if __name__ == "__main__":
    main()
