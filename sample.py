"""Continue a prompt with a trained model, as nanoGPT's sample.py: `python sample.py --prompt "我 吃 蘋果"` is
`python train.py sample --prompt "我 吃 蘋果"` (--help for the flags). The code is gptlab/sample.py.
"""

import sys

from gptlab.sample import sample_main
from gptlab.settings import run_cli

if __name__ == "__main__":
    sys.exit(run_cli(sample_main, sys.argv[1:], "sample.py"))
