from privacy_ci.cli.main import app

app()
