# Two stages. The first builds the project's wheel with CI's own toolchain: the whole
# hash-locked set CI tests (requirements.lock, from pyproject.toml by .ci/lock), build backend
# included, nothing more resolved. The image is the second: the runtime's part of that same
# lock (requirements-runtime.lock: the same pins and hashes, no dev extra, no test tools),
# the wheel, and a user that is not root.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md requirements-pip.lock requirements.lock ./
RUN pip install --no-cache-dir --require-hashes -r requirements-pip.lock \
    && pip install --no-cache-dir --require-hashes -r requirements.lock
COPY proxy ./proxy
COPY strategies ./strategies
RUN pip wheel --no-cache-dir --no-deps --no-build-isolation --wheel-dir /wheels .

FROM python:3.11-slim
WORKDIR /app
COPY requirements-runtime.lock ./
RUN pip install --no-cache-dir --require-hashes -r requirements-runtime.lock
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-deps /wheels/*.whl && rm -rf /wheels
COPY config.example.yaml ./
# The store (data_dir: ./.contextwarden) is the one place it writes; the code and the config
# stay root's, read-only to the process.
RUN groupadd --system --gid 10001 contextwarden \
    && useradd --system --uid 10001 --gid 10001 --create-home --home-dir /home/contextwarden \
        contextwarden \
    && mkdir /app/.contextwarden && chown 10001:10001 /app/.contextwarden
ENV LITELLM_LOCAL_MODEL_COST_MAP=True
EXPOSE 8080
USER 10001:10001
# The embedded default config forwards OpenAI's formats to OPENAI_BASE_URL (default
# api.openai.com) and Anthropic Messages for claude-* to ANTHROPIC_BASE_URL (default
# api.anthropic.com, with the caller's own key). Without OPENAI_API_KEY clients bring their
# own keys; with it, serve refuses to start on 0.0.0.0 in passthrough mode (an open proxy):
# mount a config with `auth: keys` and team keys instead.
CMD ["contextwarden", "serve", "--host", "0.0.0.0", "--port", "8080"]
