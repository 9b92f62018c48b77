#!/usr/bin/python3
"""Executes examples/training/compare_train.ipynb (the course material's comparison as a
notebook, issue 74) with nbclient and Debian's ipykernel, on the first 640 images
(TPUSIM_NOTEBOOK_LIMIT): every cell must run without an error, and its own checks (the
chips learn what the CPU reference of their arithmetic learns) must hold.

    PYTHONPATH=build/python tests/training/run_notebook.py
Exit 77 (skipped) without nbclient and ipykernel, or without MNIST.
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NOTEBOOK = os.path.join(ROOT, "examples", "training", "compare_train.ipynb")


def main():
    try:
        import nbclient
        import nbformat
        import ipykernel  # noqa: F401 (the kernel nbclient starts)
    except ImportError as e:
        print(f"run_notebook: skipped: {e.name} is not installed (scripts/install-deps)")
        sys.exit(77)
    import tpusim
    try:
        tpusim.run("models/lenet5", images=1, config="small-16", engine="fast")
    except ValueError:
        print("run_notebook: skipped: no MNIST data")
        sys.exit(77)
    os.environ["TPUSIM_NOTEBOOK_LIMIT"] = "640"
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # the kernel's debugger notes
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": ROOT}})
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as e:
        sys.exit(f"run_notebook: a cell failed:\n{e}")
    print(f"run_notebook: {len(nb.cells)} cells ran")


if __name__ == "__main__":
    main()
