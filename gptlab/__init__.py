"""gptlab: the lab around the GPT of models/, which train.py and sample.py in the repository root run: the training
run around train.py's loop (run.py: flags, resume, the --out lock, Ctrl-C, the ranks of mpiexec, the report),
what train, explain and sample share (settings.py), the checkpoint file (checkpoint.py), the tasks (tasks.py), the
tokenizers (tokenizer.py), sampling (sample.py), explain mode with its page (explain.py, explain_page.py), and
the small attention that docs/graph.md draws (graph_lesson.py).
"""
