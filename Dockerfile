FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY proxy ./proxy
COPY strategies ./strategies
RUN pip install --no-cache-dir .
COPY config.example.yaml ./
ENV LITELLM_LOCAL_MODEL_COST_MAP=True
EXPOSE 8080
# The embedded default config forwards to OPENAI_BASE_URL (default api.openai.com) with
# OPENAI_API_KEY; mount a config and add `--config /app/config.yaml` for anything else.
CMD ["contextwarden", "serve", "--host", "0.0.0.0", "--port", "8080"]
