"""Execute one notebook with papermill in this process (the runner starts one per notebook).

``python -m reprobook.execute INPUT OUTPUT PARAMETERS_JSON CWD``: papermill injects the
parameters after the cell tagged ``parameters`` and writes OUTPUT, the partial notebook with
its error included when a cell fails. The exit status is 0 on success, 1 when a cell raised.
"""

from __future__ import annotations

import json
import sys


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 4:
        print(
            "usage: python -m reprobook.execute INPUT OUTPUT PARAMETERS_JSON CWD", file=sys.stderr
        )
        return 2
    source, output, parameters, cwd = args
    import papermill as pm

    try:
        pm.execute_notebook(
            source,
            output,
            parameters=json.loads(parameters),
            cwd=cwd,
            kernel_name="python3",
            progress_bar=False,
            log_output=False,
            request_save_on_cell_execute=True,
        )
    except pm.PapermillExecutionError as err:
        print(f"{err.ename}: {err.evalue} (cell {err.exec_count})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
