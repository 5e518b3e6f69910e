"""The tensorrt-byoc contract Handler: tokenize, prefill + decode steps with the KV cache, detokenize.

Artifact files it reads (written by systems/tensorrt_byoc/recipe.py):
    decoder.onnx (+ decoder.onnx.data)   the graph (engine.py documents its inputs and outputs)
    decoder.json                          layers, heads, head_dim, vocab, eos id, serving dtype
    tensorrt_profile.json                 batch and sequence bounds the engine is built for
    tokenizer.json                        the source tokenizer, loaded with `tokenizers` (no transformers here)

Limits come from the profile: at most max_batch prompts per engine call (more are run in chunks), and
prompt tokens + max_new_tokens <= max_sequence_length, else a RequestError (HTTP 400) quoting the limit.
A request without max_new_tokens (the reference {"input": "..."} shape) gets the contract default (64) cut
to the room its longest prompt leaves in the profile, so the reference requests are served as before.
Decoding: greedy, or sampling with temperature / top_k / top_p (seeded with `seed`), repetition_penalty and
min_new_tokens like transformers' `generate`; beam search is not offered (num_beams must be 1).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .engine import PROFILE_FILE, Backend, open_backend

if TYPE_CHECKING:  # the type checker reads the repository's layout
    from systems.byoc_server.contract import GenerationParameters, RequestError
else:
    try:  # the repository (tests, model_build): the same module objects the server there uses
        from systems.byoc_server.contract import GenerationParameters, RequestError
    except ImportError:  # the image: /opt/program/byoc_server
        from byoc_server.contract import GenerationParameters, RequestError

log = logging.getLogger("tensorrt_byoc.handler")

INFO_FILE = "decoder.json"
TOKENIZER_FILE = "tokenizer.json"
MASKED = -10000.0  # GPT-2's own mask value: finite in fp16, so a fully masked (padding) row never gives NaN


@dataclass
class DecodeState:
    """One batch being generated: the KV cache and what each row may attend to."""

    past: np.ndarray  # [layers, 2, batch, heads, total, head_dim]
    mask: np.ndarray  # [batch, total] 1 = real token, 0 = dummy slot or left padding
    next_position: np.ndarray  # [batch] position id of each row's next token
    trace: list[np.ndarray] = field(default_factory=list)


class TensorRTHandler:
    """byoc_server.contract.Handler for the exported GPT-2 decoder."""

    def __init__(self, backend: str | None = None) -> None:
        self.backend_name = backend
        self.backend: Backend | None = None

    # ------------------------------------------------------------------ load
    def load(self, model_dir: Path) -> None:
        from tokenizers import Tokenizer

        model_dir = Path(model_dir)
        self.info: dict[str, Any] = json.loads((model_dir / INFO_FILE).read_text())
        self.profile: dict[str, Any] = json.loads((model_dir / PROFILE_FILE).read_text())
        self._check_environment()
        self.max_batch = int(self.profile["max_batch"])
        self.min_batch = int(self.profile["min_batch"])
        self.max_sequence_length = int(self.profile["max_sequence_length"])
        self.eos = self.info.get("eos_token_id")
        self.pad = self.info.get("pad_token_id", self.eos) or 0
        self.tokenizer = Tokenizer.from_file(str(model_dir / TOKENIZER_FILE))
        self.backend = open_backend(model_dir, self.info, self.profile, self.backend_name)
        log.info(
            "loaded %s with backend %s: batch %d-%d, max_sequence_length %d",
            model_dir,
            self.backend.name,
            self.min_batch,
            self.max_batch,
            self.max_sequence_length,
        )

    def _check_environment(self) -> None:
        """The endpoint's environment states the profile it was configured with; a different artifact is an error."""
        for env, key in (("TRT_MAX_BATCH", "max_batch"), ("TRT_MAX_SEQUENCE_LENGTH", "max_sequence_length")):
            value = os.environ.get(env)
            if value and int(value) != int(self.profile[key]):
                raise ValueError(
                    f"{env}={value} (the endpoint config) differs from the artifact's {PROFILE_FILE} {key}="
                    f"{self.profile[key]}: rebuild the artifact (python -m model_build build) and redeploy"
                )

    # ------------------------------------------------------------------ contract
    def generate(self, prompts: list[str], parameters: GenerationParameters) -> list[str]:
        ids = self.encode(prompts, parameters)
        parameters = self.fit_default_length(ids, parameters)
        out: list[str] = []
        for start in range(0, len(ids), self.max_batch):
            for tokens in self.generate_ids(ids[start : start + self.max_batch], parameters):
                out.append(self.tokenizer.decode(tokens, skip_special_tokens=True))
        return out

    def encode(self, prompts: list[str], parameters: GenerationParameters) -> list[list[int]]:
        """Token ids per prompt; RequestError when a request cannot fit the engine profile."""
        if parameters.num_beams != 1:
            raise RequestError(
                f"parameters.num_beams: value {parameters.num_beams} is not offered by tensorrt-byoc; allowed: 1"
            )
        limit = self.max_sequence_length
        explicit = "max_new_tokens" in parameters.model_fields_set
        if explicit and parameters.max_new_tokens >= limit:
            raise RequestError(
                f"parameters.max_new_tokens: value {parameters.max_new_tokens} leaves no room for the prompt: the "
                f"TensorRT engine profile's max_sequence_length is {limit} (prompt tokens + max_new_tokens <= {limit})"
            )
        ids = [enc.ids for enc in self.tokenizer.encode_batch(list(prompts), add_special_tokens=False)]
        for i, row in enumerate(ids):
            if not row:
                raise RequestError(f"inputs[{i}] has no tokens")
            if not explicit and len(row) >= limit:
                raise RequestError(
                    f"inputs[{i}] has {len(row)} tokens, which leaves no room to generate: the TensorRT engine "
                    f"profile's max_sequence_length is {limit} (prompt tokens + max_new_tokens <= {limit})"
                )
            if explicit and len(row) + parameters.max_new_tokens > limit:
                raise RequestError(
                    f"inputs[{i}] has {len(row)} tokens; with max_new_tokens {parameters.max_new_tokens} that is "
                    f"{len(row) + parameters.max_new_tokens}, above the TensorRT engine profile's max_sequence_length "
                    f"{limit} (prompt tokens + max_new_tokens <= {limit}; shorten the prompt or lower max_new_tokens)"
                )
        return ids

    def fit_default_length(self, ids: list[list[int]], parameters: GenerationParameters) -> GenerationParameters:
        """A request that leaves max_new_tokens out (the reference {"input": ...} shape always does) gets the
        contract default cut to what the profile leaves after the request's longest prompt; an explicit value
        is never changed (encode refuses it when it does not fit)."""
        if "max_new_tokens" in parameters.model_fields_set:
            return parameters
        room = min(parameters.max_new_tokens, self.max_sequence_length - max(len(row) for row in ids))
        if parameters.min_new_tokens > room:
            raise RequestError(
                f"parameters.min_new_tokens: value {parameters.min_new_tokens} does not fit: the longest prompt leaves "
                f"{room} tokens of the TensorRT engine profile's max_sequence_length {self.max_sequence_length}"
            )
        return parameters.model_copy(update={"max_new_tokens": room})

    # ------------------------------------------------------------------ decoding
    def generate_ids(
        self, batch: list[list[int]], parameters: GenerationParameters, trace: list[np.ndarray] | None = None
    ) -> list[list[int]]:
        """New token ids per row (eos excluded). `trace`, when given, receives the prefill logits
        [batch, seq, vocab] (left-padded) and then the [batch, vocab] logits each token was chosen from."""
        if not 1 <= len(batch) <= self.max_batch:
            raise RequestError(
                f"a batch holds 1-{self.max_batch} prompts (the engine profile's max_batch), got {len(batch)}"
            )
        rows = len(batch)
        longest = max(len(row) for row in batch)
        if longest + parameters.max_new_tokens > self.max_sequence_length:  # never run shapes beyond the profile
            raise RequestError(
                f"a prompt of {longest} tokens + max_new_tokens {parameters.max_new_tokens} is above the TensorRT "
                f"engine profile's max_sequence_length {self.max_sequence_length}"
            )
        padded = batch + [batch[0]] * max(0, self.min_batch - rows)  # the profile's min_batch, when above 1
        rng = np.random.default_rng(parameters.seed)
        logits, state = self.prefill(padded)
        if trace is not None:
            trace.append(logits)
        step_logits = logits[:, -1, :]
        history = [list(row) for row in padded]
        generated: list[list[int]] = [[] for _ in padded]
        done = np.zeros(len(padded), dtype=bool)
        for step in range(parameters.max_new_tokens):
            if trace is not None:
                trace.append(step_logits)
            chosen = np.array(
                [self._choose(step_logits[b], history[b], step, parameters, rng) for b in range(len(padded))],
                dtype=np.int64,
            )
            for b, token in enumerate(chosen):
                if done[b]:
                    continue
                if self.eos is not None and token == self.eos:
                    done[b] = True
                    continue
                generated[b].append(int(token))
                history[b].append(int(token))
            if done[:rows].all() or step == parameters.max_new_tokens - 1:
                break
            feed = np.where(done, self.pad, chosen)
            step_logits = self.decode_step(feed, state)[:, -1, :]
        return generated[:rows]

    def _choose(
        self, logits: np.ndarray, history: list[int], step: int, p: GenerationParameters, rng: np.random.Generator
    ) -> int:
        scores = logits.astype(np.float64)
        if p.repetition_penalty != 1.0 and history:
            seen = np.unique(np.asarray(history))
            values = scores[seen]
            scores[seen] = np.where(values < 0, values * p.repetition_penalty, values / p.repetition_penalty)
        if self.eos is not None and step < p.min_new_tokens:
            scores[self.eos] = -np.inf
        if not p.do_sample:
            return int(np.argmax(scores))
        scores = scores / p.temperature
        if p.top_k and p.top_k < scores.size:
            kth = np.partition(scores, -p.top_k)[-p.top_k]
            scores = np.where(scores < kth, -np.inf, scores)
        probs = np.exp(scores - scores.max())
        probs /= probs.sum()
        if p.top_p < 1.0:
            order = np.argsort(-probs)
            cumulative = np.cumsum(probs[order])
            keep = cumulative - probs[order] < p.top_p  # the smallest set whose mass reaches top_p
            filtered = np.zeros_like(probs)
            filtered[order[keep]] = probs[order[keep]]
            probs = filtered / filtered.sum()
        return int(rng.choice(probs.size, p=probs))

    def prefill(self, batch: list[list[int]]) -> tuple[np.ndarray, DecodeState]:
        """Run the left-padded prompts; returns logits [batch, seq, vocab] and the state for decode steps.

        The cache starts with one dummy slot (masked out), so prefill and decode are the same graph."""
        info = self.info
        rows, seq = len(batch), max(len(r) for r in batch)
        ids = np.full((rows, seq), self.pad, dtype=np.int64)
        mask = np.zeros((rows, 1 + seq), dtype=np.int64)  # slot 0: the dummy past
        for b, row in enumerate(batch):
            ids[b, seq - len(row) :] = row
            mask[b, 1 + seq - len(row) :] = 1
        past = np.zeros((info["num_layers"], 2, rows, info["num_heads"], 1, info["head_dim"]), dtype=np.float32)
        positions = np.clip(np.cumsum(mask[:, 1:], axis=1) - 1, 0, None)
        state = DecodeState(past=past, mask=mask[:, :1], next_position=positions[:, -1] + 1)
        return self._run(ids, positions, mask[:, 1:], state), state

    def decode_step(self, tokens: np.ndarray, state: DecodeState) -> np.ndarray:
        """One token per row; returns logits [batch, 1, vocab]."""
        positions = state.next_position[:, None].copy()
        state.next_position = state.next_position + 1
        return self._run(tokens[:, None].astype(np.int64), positions, np.ones((len(tokens), 1), dtype=np.int64), state)

    def _run(self, ids: np.ndarray, positions: np.ndarray, new_mask: np.ndarray, state: DecodeState) -> np.ndarray:
        assert self.backend is not None, "load() first"
        past_len, seq = state.past.shape[4], ids.shape[1]
        mask = np.concatenate([state.mask, new_mask], axis=1)  # [batch, total]
        total = past_len + seq
        causal = np.arange(total)[None, :] <= (past_len + np.arange(seq))[:, None]  # [seq, total]
        allowed = causal[None, :, :] & (mask[:, None, :] == 1)
        bias = np.where(allowed, 0.0, MASKED).astype(np.float32)[:, None, :, :]
        out = self.backend.run(
            {
                "input_ids": ids,
                "position_ids": positions.astype(np.int64),
                "attention_bias": bias,
                "past_key_values": state.past,
            }
        )
        state.past, state.mask = out["present_key_values"], mask
        return out["logits"]
