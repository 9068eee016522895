"""Mixture of experts: exactly top_k distinct experts per token, renormalised weights, load and aux loss."""
import pytest
import torch

N_EXPERTS = 4


def routed(tiny_model, top_k=2, arch="decoder", **changes):
    model = tiny_model(arch=arch, ffn="moe", n_experts=N_EXPERTS, top_k=top_k, **changes)
    ids = torch.randint(0, 32, (3, 7), generator=torch.Generator().manual_seed(0))
    logits, trace = model.run_with_trace(*((ids, ids) if arch == "encoder-decoder" else (ids,)), names="*mlp.*")
    return model, ids, logits, trace


def moe_layers(trace):
    return sorted({name.rsplit(".", 1)[0] for name in trace.names()})


@pytest.mark.parametrize("top_k", [1, 2, 3])
@pytest.mark.parametrize("arch", ["decoder", "encoder-decoder"])
def test_routing_invariants(top_k, arch, tiny_model):
    _, ids, _, trace = routed(tiny_model, top_k, arch)
    layers = moe_layers(trace)
    assert len(layers) == (4 if arch == "encoder-decoder" else 2)
    for layer in layers:
        probs = trace[f"{layer}.hook_router_probs"]  # (B, T, E)
        indices = trace[f"{layer}.hook_expert_indices"]  # (B, T, k)
        weights = trace[f"{layer}.hook_expert_weights"]  # (B, T, k)
        load = trace[f"{layer}.hook_expert_load"]  # (E,)
        assert indices.shape == weights.shape == (*ids.shape, top_k)
        torch.testing.assert_close(probs, trace[f"{layer}.hook_router_logits"].softmax(-1))
        # exactly top_k distinct experts per token, all valid
        assert ((indices >= 0) & (indices < N_EXPERTS)).all()
        assert all(len(set(token)) == top_k for token in indices.reshape(-1, top_k).tolist())
        # ... and they are the most probable ones
        chosen_probs = probs.gather(-1, indices)  # (B, T, k)
        unchosen = probs.scatter(-1, indices, -1.0)  # chosen ones knocked out
        assert (chosen_probs.min(-1).values >= unchosen.max(-1).values).all()
        # weights: the chosen probabilities renormalised to sum to 1
        torch.testing.assert_close(weights, chosen_probs / chosen_probs.sum(-1, keepdim=True))
        torch.testing.assert_close(weights.sum(-1), torch.ones(ids.shape))
        # load: the fraction of token slots each expert took
        counts = torch.bincount(indices.flatten(), minlength=N_EXPERTS).float()
        torch.testing.assert_close(load, counts / counts.sum())
        torch.testing.assert_close(load.sum(), torch.tensor(1.0))
        # Switch-Transformer aux loss: E * sum_e load_e * mean router prob_e
        expected_aux = N_EXPERTS * (load * probs.reshape(-1, N_EXPERTS).mean(0)).sum()
        torch.testing.assert_close(trace[f"{layer}.hook_aux_loss"], expected_aux)


def test_model_aux_loss_sums_the_layers(tiny_model):
    model, _, _, trace = routed(tiny_model)
    total = sum(trace[f"{layer}.hook_aux_loss"] for layer in moe_layers(trace))
    torch.testing.assert_close(model.aux_loss, total)


def test_aux_loss_is_one_for_uniform_routing_and_grows_when_routing_collapses(tiny_model):
    model = tiny_model(ffn="moe", n_experts=N_EXPERTS, top_k=2)
    ids = torch.randint(0, 32, (3, 7), generator=torch.Generator().manual_seed(1))

    def aux_losses(rewrite_router_logits):
        every_router = {f"blocks.{i}.mlp.hook_router_logits": rewrite_router_logits for i in range(2)}
        _, trace = model.run_with_trace(ids, names="*hook_aux_loss", interventions=every_router)
        return [event.tensor for event in trace.events]

    uniform = aux_losses(lambda logits, event: torch.zeros_like(logits))  # every expert equally likely
    assert uniform == [torch.tensor(1.0)] * 2
    # collapse: every token strongly prefers experts 0 and 1, which then take all the load
    favour_two = torch.tensor([10.0, 10.0, 0.0, 0.0])
    collapsed = aux_losses(lambda logits, event: logits + favour_two)
    assert all(loss > 1.9 for loss in collapsed), collapsed


def test_an_expert_whose_logit_is_minus_infinity_is_never_chosen(tiny_model):
    model, ids, baseline, trace = routed(tiny_model)
    layer = "blocks.0.mlp"
    busiest = int(trace[f"{layer}.hook_expert_load"].argmax())

    def drop_expert(logits, event):
        logits = logits.clone()
        logits[..., busiest] = float("-inf")
        return logits

    logits, dropped = model.run_with_trace(ids, names="*mlp.*", interventions={f"{layer}.hook_router_logits": drop_expert})
    assert not (dropped[f"{layer}.hook_expert_indices"] == busiest).any()
    assert dropped[f"{layer}.hook_expert_load"][busiest] == 0
    assert dropped[f"{layer}.hook_router_probs"][..., busiest].max() == 0
    assert torch.isfinite(logits).all()
    assert not torch.allclose(logits, baseline), "dropping the busiest expert must change the output"
    # the other layer is not touched by the intervention itself
    assert (dropped["blocks.1.mlp.hook_router_probs"] > 0).all()


def test_weighing_the_input_feeds_each_chosen_expert_the_scaled_token(tiny_model):
    """router_scales_input (Llama 4): the layer's output is shared(x) + sum over the chosen e of expert_e(g_e·x),
    rebuilt here from the recorded choice and weights, and it differs from weighing the output."""
    model, ids, _, trace = routed(tiny_model, top_k=2, router="sigmoid", router_norm=False, n_shared_experts=1,
                                 router_scales_input=True)
    layer = moe_layers(trace)[0]
    moe = model.get_submodule(layer)
    x = torch.randn(5, model.cfg.d_model, generator=torch.Generator().manual_seed(1))  # (N, D)
    with torch.no_grad():
        out = moe(x[None])[0]  # (N, D)
        chosen = moe.choose(torch.sigmoid(moe.router(x))[None])[0]  # (N, k)
        weights = torch.sigmoid(moe.router(x)).gather(-1, chosen)  # (N, k): no renormalising
        expected = moe.shared(x) + torch.stack([
            sum(moe.experts[e](x[t] * w) for e, w in zip(chosen[t].tolist(), weights[t])) for t in range(len(x))])
        assert torch.allclose(out, expected, atol=1e-7)
        moe.scales_input = False
        assert (moe(x[None])[0] - out).abs().max() > 0.05 * out.abs().max()  # SwiGLU is not linear in its input


def test_moe_layers_places_the_routed_layers_and_bad_lists_say_the_fix(tiny_model):
    model, _, _, trace = routed(tiny_model, n_layers=4, moe_layers="every 2")
    routers = sorted(name for name in trace.names() if name.endswith("hook_router_logits"))
    assert routers == ["blocks.1.mlp.hook_router_logits", "blocks.3.mlp.hook_router_logits"]  # the routed layers
    assert [hasattr(block.mlp, "experts") for block in model.blocks] == [False, True, False, True]
    with pytest.raises(ValueError, match=r"moe_layers='5' names layer 5, but n_layers=4 numbers them 0 to 3"):
        model.cfg.replace(moe_layers="5")
    with pytest.raises(ValueError, match=r"first_dense_layers=2 leaves none of the n_layers=4 layers routed"):
        model.cfg.replace(moe_layers="0, 1", first_dense_layers=2)
    with pytest.raises(ValueError, match=r"moe_layers='every 2' is a mixture-of-experts setting, but ffn='swiglu'"):
        model.cfg.replace(ffn="swiglu")
