"""The HTTP interface: FastAPI over the service façade (``esfis serve``)."""
