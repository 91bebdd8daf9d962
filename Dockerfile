FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md requirements.lock ./
# The hash-locked set CI tests (requirements.lock, from pyproject.toml by .ci/lock), then the
# project with nothing more resolved.
RUN pip install --no-cache-dir --require-hashes -r requirements.lock
COPY proxy ./proxy
COPY strategies ./strategies
RUN pip install --no-cache-dir --no-deps --no-build-isolation .
COPY config.example.yaml ./
ENV LITELLM_LOCAL_MODEL_COST_MAP=True
EXPOSE 8080
# The embedded default config forwards OpenAI's formats to OPENAI_BASE_URL (default
# api.openai.com) and Anthropic Messages for claude-* to ANTHROPIC_BASE_URL (default
# api.anthropic.com, with the caller's own key). Without OPENAI_API_KEY clients bring their
# own keys; with it, serve refuses to start on 0.0.0.0 in passthrough mode (an open proxy):
# mount a config with `auth: keys` and team keys instead.
CMD ["contextwarden", "serve", "--host", "0.0.0.0", "--port", "8080"]
