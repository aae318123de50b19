import os

import torch

os.environ.setdefault("STREAMLIT_BROWSER_GATHER_USAGE_STATS", "false")
torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
