"""Learning-process builders, drop-in replacements for `tff.learning.algorithms` builders."""

from tff_robust import _lazy_submodules
from tff_robust.processes.rfa import build_rfa_process
from tff_robust.processes.composition import build_fed_avg_process
from tff_robust.processes.delta_fl import build_delta_fl_process
from tff_robust.processes.fedplus import build_fedplus_process
from tff_robust.processes.fedprox import build_fedprox_process
from tff_robust.processes.personalized_rfa import build_personalized_rfa_process
from tff_robust.processes.dde import build_dde_process
from tff_robust.processes.mtfeel import build_mtfeel_process
from tff_robust.processes.sign_sgd import build_sign_sgd_process

__getattr__ = _lazy_submodules.submodule_getattr(__name__)  # the other submodules, on first use
