"""`/admin`: the dashboard page (a shell with no data in it) and its script and styles.

The page holds nothing secret, so it needs no token; the script asks the admin for the token,
keeps it in sessionStorage and calls the JSON admin API with it. A strict Content-Security-Policy
allows only this origin's script and styles.
"""

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from app import __version__
from app.api.responses import OPERATOR
from app.dashboard import STATIC, TEMPLATES
from app.queue.operation import OperationType
from app.queue.repository import FINISHED

router = APIRouter(tags=[OPERATOR])
templates = Jinja2Templates(directory=TEMPLATES)

#: The columns of the queue table: what needs attention first, then the finished ones of the window.
COLUMNS = [("dead", "Dead"), ("failed", "Failed"), ("pending", "Pending"), ("processing", "Running"),
           ("completed", "Completed"), ("cancelled", "Cancelled"), ("discarded", "Discarded")]

HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class _Column:
    def __init__(self, value: str, label: str):
        self.value, self.label = value, label
        self.finished = value in FINISHED


@router.get(
    "/admin",
    response_class=HTMLResponse,
    summary="The admin dashboard",
    description="For operators and admins, in a browser: queue counts per type and status, destination "
    "health, dead letters with retry and discard. The page itself holds no data and needs no token: its "
    "script asks for the ADMIN_TOKEN, keeps it for the browser tab and calls the admin API with it.",
    responses={200: {"description": "The page.", "content": {"text/html": {"schema": {"type": "string"}}}}},
)
async def dashboard(request: Request) -> HTMLResponse:
    """The dashboard: queue counts per type and status, dead letters with retry and discard."""
    context = {
        "static": f"{request.scope.get('root_path', '')}/admin/static",
        "version": __version__,
        "types": [t.value for t in OperationType],
        "statuses": [_Column(value, label) for value, label in COLUMNS],
    }
    return templates.TemplateResponse(request, "admin.html", context, headers=HEADERS)


def install(app: FastAPI) -> None:
    """Serve the dashboard page and its static files on `app`."""
    app.include_router(router)
    app.mount("/admin/static", StaticFiles(directory=STATIC), name="admin-static")
