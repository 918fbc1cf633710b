"""Moved to `tff_robust.runtime.worker_service` (issue 34). This old path is kept for now: imported, it is the same
module object; `python -m tff_robust.simulation.worker_service ...` serves as `python -m
tff_robust.runtime.worker_service ...` does."""

import sys

from tff_robust.runtime import worker_service

if __name__ == '__main__':
  worker_service.main(sys.argv)
else:
  sys.modules[__name__] = worker_service
