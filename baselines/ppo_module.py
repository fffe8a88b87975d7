"""PPO RL module with action masking and a factored (shared per action kind) policy head.

The RL view's 613 actions are mostly ``kind(service)`` pairs (``index = 1 + slot * 9 + kind``). A plain
MLP head learns one logit per index, so what it learns about ``rollback(frontend)`` teaches it
nothing about ``rollback(cartservice)``. `FactoredMaskingTorchRLModule` adds to the MLP's logits

    bias[kind(a)]  +  w[kind(a)] . features(service slot of a)     (the second term: service actions only)

with ``bias`` (one per action kind: noop, the 9 service kinds, flag_off, drain, uncordon, failover) and
``w`` (9 x per-service features) shared by every service, then masks invalid actions like RLlib's
``ActionMaskingTorchRLModule``. Both start at zero, so the untrained policy is the plain module's.
This module imports ray and torch at import time: import it only where training or inference runs.

>>> kinds = action_kinds()                                       # doctest: +SKIP
>>> len(kinds), kinds[0], kinds[1], kinds[3], kinds[577], kinds[-1]  # doctest: +SKIP
(613, 0, 1, 3, 10, 13)
"""

from __future__ import annotations

import numpy as np
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.examples.rl_modules.classes.action_masking_rlm import ActionMaskingTorchRLModule

from wrappers.rl import (GLOBAL_FEATURES, MAX_ACTIONS, MAX_FLAGS, MAX_NODES, MAX_SERVICES, MAX_ZONES,
                         SERVICE_KINDS, SVC_FEATURES)

N_SVC_KINDS = len(SERVICE_KINDS)
#: the shared terms enter the logits scaled by these (under Adam: a learning-rate multiplier, since the
#: few shared parameters must move far more than any one of the MLP's weights)
BIAS_SCALE, W_SCALE = 10.0, 3.0
N_GLOBAL = GLOBAL_FEATURES if isinstance(GLOBAL_FEATURES, int) else len(GLOBAL_FEATURES)
N_SVC_FEAT = SVC_FEATURES if isinstance(SVC_FEATURES, int) else len(SVC_FEATURES)


def action_kinds() -> np.ndarray:
    """Kind id of every action index: 0 noop, 1..9 service kinds, then flag_off, drain, uncordon, failover."""
    kinds = [0]
    kinds += [1 + k for _ in range(MAX_SERVICES) for k in range(N_SVC_KINDS)]
    for j, n in enumerate((MAX_FLAGS, MAX_NODES, MAX_NODES, MAX_ZONES)):
        kinds += [1 + N_SVC_KINDS + j] * n
    out = np.asarray(kinds, dtype=np.int64)
    if len(out) != MAX_ACTIONS:
        raise ValueError(f"action layout changed: {len(out)} kinds for {MAX_ACTIONS} actions")
    return out


class FactoredMaskingTorchRLModule(ActionMaskingTorchRLModule):
    """`ActionMaskingTorchRLModule` plus the shared per-kind logit terms of the module docstring."""

    def setup(self):
        super().setup()
        n_kinds = 1 + N_SVC_KINDS + 4
        self.kind_bias = torch.nn.Parameter(torch.zeros(n_kinds))
        self.kind_w = torch.nn.Parameter(torch.zeros(N_SVC_KINDS, N_SVC_FEAT))
        self.register_buffer("kind_of_action", torch.from_numpy(action_kinds()), persistent=False)

    def _shared_logits(self, obs: torch.Tensor) -> torch.Tensor:
        b = obs.shape[0]
        svc = obs[:, N_GLOBAL:N_GLOBAL + MAX_SERVICES * N_SVC_FEAT].reshape(b, MAX_SERVICES, N_SVC_FEAT)
        per_svc = (svc @ (W_SCALE * self.kind_w).T).reshape(b, MAX_SERVICES * N_SVC_KINDS)   # index slot * 9 + kind
        extra = torch.zeros(b, MAX_ACTIONS, dtype=obs.dtype, device=obs.device)
        extra[:, 1:1 + MAX_SERVICES * N_SVC_KINDS] = per_svc
        return extra + BIAS_SCALE * self.kind_bias[self.kind_of_action]

    def _add(self, outs, obs):
        if isinstance(obs, dict):
            obs = obs["observations"]
        outs[Columns.ACTION_DIST_INPUTS] = outs[Columns.ACTION_DIST_INPUTS] + self._shared_logits(obs.float())
        return outs

    def _forward_inference(self, batch, **kwargs):
        action_mask, batch = self._preprocess_batch(batch)
        outs = super(ActionMaskingTorchRLModule, self)._forward_inference(batch, **kwargs)
        return self._mask_action_logits(self._add(outs, batch[Columns.OBS]), action_mask)

    def _forward_exploration(self, batch, **kwargs):
        action_mask, batch = self._preprocess_batch(batch)
        outs = super(ActionMaskingTorchRLModule, self)._forward_exploration(batch, **kwargs)
        return self._mask_action_logits(self._add(outs, batch[Columns.OBS]), action_mask)

    def _forward_train(self, batch, **kwargs):
        outs = super(ActionMaskingTorchRLModule, self)._forward_train(batch, **kwargs)
        return self._mask_action_logits(self._add(outs, batch[Columns.OBS]), batch["action_mask"])
