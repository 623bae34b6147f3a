"""biaslab.captioning.training.fit: early stopping restores the best epoch's trainable weights
and buffers, and its copy holds nothing else (BLIP-2's frozen ViT/OPT are ~11 GB in fp32)."""
import torch

from biaslab.captioning.training import Schedule, fit


class _Toy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(2, 1)
        self.frozen = torch.nn.Parameter(torch.ones(3), requires_grad=False)
        self.register_buffer("steps", torch.zeros(()))

    def forward(self, x):
        if self.training:
            self.steps += 1
        return self.lin(x) * self.frozen[0]


def test_fit_restores_the_best_epoch_and_copies_only_what_training_changes():
    torch.manual_seed(0)
    model = _Toy()
    x, y = torch.randn(8, 2), torch.randn(8, 1)

    def batch_loss(idx):
        err = model(x[idx]) - y[idx]
        return (err ** 2).sum(), len(idx)

    vals = iter([1.0, 2.0, 3.0])        # best at epoch 0, then patience 2 stops after epoch 2
    snap = {}

    def on_epoch(epoch, rec):
        if epoch == 0:
            snap["w"] = model.lin.weight.detach().clone()
            snap["steps"] = float(model.steps)
        if epoch == 1:
            # a frozen parameter is not in the early-stopping copy: this edit must survive
            model.frozen.data.fill_(7.0)

    sch = Schedule(epochs=5, lr=0.1, weight_decay=0.01, warmup=0.0, batch_size=4,
                   patience=2, seed=0)
    hist, best_epoch, best = fit(model, 8, batch_loss, sch, val_loss=lambda: next(vals),
                                 on_epoch=on_epoch)
    assert [h["epoch"] for h in hist] == [0, 1, 2] and best_epoch == 0 and best == 1.0
    assert torch.equal(model.lin.weight, snap["w"])            # trainable: restored
    assert float(model.steps) == snap["steps"] == 2.0           # buffer: restored
    assert torch.equal(model.frozen, torch.full((3,), 7.0))     # frozen: not copied
    assert not model.training
