"""Speculative decoding: a small draft model guesses k tokens, the target checks them all in one forward pass.

Greedy decoding costs one forward pass of the target per new token. Here a cheap draft model proposes k tokens
one by one (k small forwards, each with its own KV cache); the target then reads all k after its cached prefix in
a single forward pass, which gives its own greedy choice at every one of the k + 1 places. The longest prefix of
the proposal that agrees with those choices is kept, followed by the target's own next token, so every round adds
between 1 and k + 1 tokens, and the text is exactly the target's greedy text: a proposed token is kept only where
the target would have picked it. Both caches are then cut back to the tokens kept (KVCache.truncate).

The saving is in target forwards: plain greedy needs one per new token, this needs one per round.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .model import KVCache, Transformer


@dataclass(frozen=True)
class Round:
    """One draft-then-verify round."""

    proposed: tuple[int, ...]  # the draft's tokens, in order (k of them; fewer near the end of the budget)
    accepted: int  # how many of them, from the first, the target agreed with
    target_token: int  # the target's own choice after the accepted ones: kept in every round

    @property
    def kept(self) -> tuple[int, ...]:
        """The tokens this round adds to the text: the accepted proposals, then the target's token."""
        return (*self.proposed[:self.accepted], self.target_token)


@dataclass
class SpeculativeResult:
    """The generated text and what each round proposed, accepted and added."""

    ids: torch.Tensor  # (1, T + new): the prompt and the new tokens, equal to the target's greedy generate()
    prompt_length: int
    rounds: list[Round] = field(default_factory=list)

    @property
    def new_tokens(self) -> int:
        return self.ids.shape[1] - self.prompt_length

    @property
    def proposed(self) -> int:
        return sum(len(r.proposed) for r in self.rounds)

    @property
    def accepted(self) -> int:
        return sum(r.accepted for r in self.rounds)

    @property
    def acceptance_rate(self) -> float:
        """Accepted proposals over all proposals (0 when the draft proposed nothing)."""
        return self.accepted / self.proposed if self.proposed else 0.0

    @property
    def target_forwards(self) -> int:
        """One target pass per round."""
        return len(self.rounds)

    @property
    def greedy_forwards(self) -> int:
        """What plain greedy decoding spends on the same text: one target pass per new token."""
        return self.new_tokens

    @property
    def draft_forwards(self) -> int:
        """One draft pass per proposed token."""
        return self.proposed


def early_exit_draft(target: Transformer, n_layers: int) -> Transformer:
    """A draft made of the target's own first n_layers blocks, its final norm and its unembedding (their weights copied).

    It costs n_layers / target layers of a target pass and needs no training of its own; how often the target
    agrees with it says how much of the next token its first layers already know.
    """
    if not 1 <= n_layers < target.cfg.n_layers:
        raise ValueError(f"n_layers={n_layers}: an early-exit draft keeps from 1 to {target.cfg.n_layers - 1} of the "
                         f"target's {target.cfg.n_layers} layers")
    draft = Transformer(target.cfg.replace(n_layers=n_layers), device=target.device).eval()
    kept = {name: tensor for name, tensor in target.state_dict().items() if name in draft.state_dict()}
    draft.load_state_dict(kept)  # every draft weight is one of the target's: strict, so none is left at random
    return draft


def check_pair(target: Transformer, draft: Transformer, k: int,
               vocabularies: tuple[str, str] | None = None) -> None:
    """Raise ValueError unless `draft` can propose tokens for `target` k at a time.

    vocabularies: the names (or JSON) of the target's and the draft's tokenizers, where the caller knows them: two
    models of the same vocabulary size may still number their tokens differently.
    """
    if k < 1:
        raise ValueError(f"k={k}: the draft must propose at least one token a round; pick k >= 1")
    if target.cfg.vocab_size != draft.cfg.vocab_size:
        raise ValueError(f"the draft's vocabulary has {draft.cfg.vocab_size} tokens and the target's "
                         f"{target.cfg.vocab_size}: the target cannot check a token it does not have; pick a draft "
                         "trained on the target's tokens")
    if vocabularies is not None and vocabularies[0] != vocabularies[1]:
        raise ValueError(f"the draft reads text as {vocabularies[1]!r} tokens and the target as {vocabularies[0]!r}: "
                         f"the same id ({target.cfg.vocab_size} of them each) means a different token to each; pick "
                         "a draft with the target's tokenizer")
    for role, model in (("target", target), ("draft", draft)):
        arch = model.cfg.row("arch")
        if not arch.causal or arch.cross:
            raise ValueError(f"the {role} is arch={model.cfg.arch!r}: speculative decoding here runs decoder-only "
                             "models; pick arch='decoder'")


@torch.no_grad()
def speculative_generate(target: Transformer, draft: Transformer, input_ids: torch.Tensor, max_new_tokens: int,
                         k: int, vocabularies: tuple[str, str] | None = None) -> SpeculativeResult:
    """Greedy generation of `target`, with `draft` proposing k tokens a round; input_ids (1, T).

    Returns the same ids as ``target.generate(input_ids, max_new_tokens)``, with every round's proposal and
    acceptance. Both models are decoder-only, share the vocabulary, and keep a KV cache that can be truncated.
    """
    check_pair(target, draft, k, vocabularies)
    if input_ids.dim() != 2 or input_ids.shape[0] != 1 or input_ids.shape[1] < 1:
        raise ValueError(f"input_ids has shape {tuple(input_ids.shape)}: pass one prompt of at least one token, "
                         "(1, T); each row of a batch would accept a different number of tokens")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens={max_new_tokens} must be at least 0")
    ids = input_ids.to(target.device)  # (1, n): the text so far
    result = SpeculativeResult(ids, input_ids.shape[1])
    target_cache, draft_cache = KVCache(), KVCache()
    # each model's cache holds a prefix of the text; a forward feeds the rest of it, ids[:, cache.length:]
    while result.new_tokens < max_new_tokens:
        # never propose past the budget: a round adds at most proposals + 1 tokens
        proposal_length = min(k, max_new_tokens - result.new_tokens - 1)
        proposed = _propose(draft, draft_cache, ids, proposal_length)  # (1, proposal_length)
        fed = torch.cat((ids[:, target_cache.length:], proposed.to(ids.device)), dim=1)  # (1, missing + proposals)
        logits = target(fed, cache=target_cache)  # (1, missing + proposals, vocab)
        # the target's greedy choice after the text and after each proposal: (proposals + 1,)
        choices = logits[0, -(proposal_length + 1):].float().argmax(-1)
        agrees = (proposed[0].to(choices.device) == choices[:proposal_length]).long()  # (proposals,)
        accepted = int(agrees.cumprod(0).sum())  # the longest agreeing prefix
        round_ = Round(tuple(proposed[0].tolist()), accepted, int(choices[accepted]))
        result.rounds.append(round_)
        ids = torch.cat((ids, torch.tensor([round_.kept], device=ids.device)), dim=1)  # (1, n + accepted + 1)
        # keep every token whose keys are right: all but the newest, which the next round feeds
        target_cache.truncate(ids.shape[1] - 1)
        draft_cache.truncate(min(draft_cache.length, ids.shape[1] - 1))
        result.ids = ids
    return result


def _propose(draft: Transformer, cache: KVCache, ids: torch.Tensor, n: int) -> torch.Tensor:
    """The draft's n greedy tokens after ids (1, T), its cache extended as it goes: (1, n)."""
    proposed = ids.new_zeros(1, 0)  # (1, 0)
    if n == 0:
        return proposed
    fed = ids[:, cache.length:].to(draft.device)  # (1, missing): what its cache lacks of the text
    for _ in range(n):
        logits = draft(fed, cache=cache)  # (1, T_fed, vocab)
        fed = logits[:, -1].float().argmax(-1, keepdim=True)  # (1, 1)
        proposed = torch.cat((proposed, fed.to(ids.device)), dim=1)  # (1, proposed so far)
    return proposed
