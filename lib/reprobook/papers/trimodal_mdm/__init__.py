"""The Design Space of Tri-Modal Masked Diffusion Models (arXiv 2602.21472).

Library of chapter 03 (notebooks/03_trimodal_mdm): :mod:`.mdm` (schedules, the masked-diffusion
ELBO, complementary masks, the unmasking sampler), :mod:`.reparam` (the SDE reparameterisation
of AdamW, gamma, the critical batch size, the noisy quadratic, the scaling-law fit),
:mod:`.data` (the offline tri-modal corpus), :mod:`.model` (the denoisers) and
:mod:`.experiments` (the sweeps the notebooks run); :mod:`.config` holds the profiles.
"""

from reprobook.core import lazy_submodules

from . import config  # the rest loads on first use (the package's __getattr__)

__all__ = ["config", "data", "mdm", "model", "reparam"]
__getattr__ = lazy_submodules(__name__)  # mdm.experiments loads on first use
