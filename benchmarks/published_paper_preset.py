"""Time of one LIC_M classifier at the paper preset (thesis 2.8.1) on the published NIC
gender study: 1 and 2 epochs, so that per-epoch and set-up costs separate.
Result: benchmarks/results/published_paper_preset.json (written by hand from the output)."""
import time, json
from biaslab.data import published as P
from biaslab.metrics.lic import lic_details
df = P.read_outputs('../shared/published-captions', 'nic', 'gender')
caps = dict(zip(df.image_id.astype(int), df.caption))
out = {}
for ep in (1, 2):
    t = time.perf_counter()
    r = lic_details(caps, None, P.labels(df, 'gender'), seeds=[0], config={"preset": "paper", "epochs": ep})
    out[ep] = (time.perf_counter() - t, r["LIC_M"])
    print(ep, out[ep], flush=True)
print(json.dumps({"per_epoch_s": out[2][0] - out[1][0], "setup_s": 2 * out[1][0] - out[2][0], "config": r["config"]}))
