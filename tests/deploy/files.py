"""Reading the repository's deploy files: the Dockerfile's instructions, the `intake` subcommands."""

import json
import shlex
from dataclasses import dataclass
from pathlib import Path

from app.cli import _parser
from app.config import Settings
from app.main import create_app

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Instruction:
    """One Dockerfile instruction: its keyword, its arguments as written, and its stage."""

    keyword: str
    args: str
    stage: int

    def exec_form(self) -> list[str]:
        """The JSON array of an exec-form CMD/ENTRYPOINT (after HEALTHCHECK options, if any)."""
        text = self.args[self.args.index("["):]
        return json.loads(text)

    def flags(self) -> dict[str, str]:
        """`--name=value` options at the start of the arguments (COPY --from=, HEALTHCHECK --interval=)."""
        found = {}
        for token in self.args.split():
            if not token.startswith("--"):
                break
            name, _, value = token[2:].partition("=")
            found[name] = value
        return found


def dockerfile(path: Path = ROOT / "Dockerfile") -> list[Instruction]:
    """The instructions, continuation lines joined, comments dropped; stage counts FROMs (0 before any)."""
    logical, current = [], ""
    for line in path.read_text().splitlines():
        if line.lstrip().startswith("#") and not current:
            continue
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + " "
            continue
        current += line
        if current.strip():
            logical.append(current.strip())
        current = ""
    instructions, stage = [], 0
    for text in logical:
        keyword, _, args = text.partition(" ")
        if keyword.upper() == "FROM":
            stage += 1
        instructions.append(Instruction(keyword.upper(), args.strip(), stage))
    return instructions


def env_values(instructions: list[Instruction], stage: int) -> dict[str, str]:
    """The ENV values set in `stage` (KEY=value form)."""
    values = {}
    for instruction in instructions:
        if instruction.keyword == "ENV" and instruction.stage == stage:
            for pair in shlex.split(instruction.args):
                key, _, value = pair.partition("=")
                values[key] = value
    return values


def intake_subcommands() -> set[str]:
    """The subcommands `intake` has (serve, worker, migrate, ...), read from its parser."""
    parser = _parser()
    actions = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    return set(actions[0].choices)


def api_routes() -> dict[str, set[str]]:
    """Each path of the app's API and the methods it answers, from its OpenAPI schema.

    (The schema is the public view of the routes: FastAPI no longer flattens included routers
    into `app.routes`.)
    """
    schema = create_app(Settings(_env_file=None, admin_token="x")).openapi()
    return {path: {method.upper() for method in operations} for path, operations in schema["paths"].items()}
