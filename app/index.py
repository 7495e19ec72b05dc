"""The ASGI entrypoint uvicorn and Vercel load: `app.index:app`."""

from app.main import create_app

app = create_app()
